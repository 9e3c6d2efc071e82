"""Release-time defenses for federated updates: noise, clipping, quantisation, and chains.

Each defense is a small frozen callable ``defense(update, generator) -> update`` that returns a
new :class:`~trainleak.releases.federated.GradientUpdate` with only ``update`` changed, so they
compose with :func:`trainleak.defenses.chain` (clip, then add noise, then quantise, ...).

References:
    Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016 (clipping + Gaussian
    noise). Zhu, Liu, Han, *Deep Leakage from Gradients*, NeurIPS 2019, Sec. 5 (noise, half
    precision and pruning as defenses). Alistarh et al., *QSGD*, NeurIPS 2017 (stochastic
    quantisation).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

import torch

from trainleak.errors import ReleaseTypeError
from trainleak.releases.base import Release
from trainleak.releases.federated import GradientUpdate
from trainleak.validation import check_fields, param

R = TypeVar("R", bound=Release)
QuantizeMode = Literal["nearest", "stochastic", "half"]


def _as_update(release: Release, who: str) -> GradientUpdate:
    if not isinstance(release, GradientUpdate):
        raise ReleaseTypeError(
            f"{who} transforms a GradientUpdate, received {type(release).__name__}"
        )
    return release


def _norm(update: dict[str, torch.Tensor]) -> float:
    return math.sqrt(sum(float((v.double() ** 2).sum()) for v in update.values()))


@dataclass(frozen=True)
class GaussianNoise:
    """Add ``N(0, sigma^2)`` to every entry; ``relative=True`` scales sigma by the update norm
    divided by the square root of the number of entries (noise-to-signal per entry).

    Example:
        >>> import torch
        >>> from trainleak.models import build_model, model_spec
        >>> from trainleak.systems.federated import fedsgd_update
        >>> spec = model_spec("mlp", input_shape=(12,), hidden=[64], out_dim=3)
        >>> params = build_model(spec, seed=0).state_dict()
        >>> upd = fedsgd_update(spec, params, torch.rand(4, 12), torch.tensor([0, 1, 2, 0]))
        >>> noisy = GaussianNoise(0.1)(upd, torch.Generator().manual_seed(0))
        >>> bool((noisy.update["layers.0.bias"] != upd.update["layers.0.bias"]).any())
        True
    """

    sigma: float = param(ge=0)
    relative: bool = False

    def __post_init__(self) -> None:
        check_fields(self)

    def __call__(self, release: R, generator: torch.Generator) -> R:
        upd = _as_update(release, "GaussianNoise")
        scale = self.sigma
        if self.relative:
            scale *= _norm(upd.update) / math.sqrt(max(upd.n_values, 1))
        new = {
            k: v + scale * torch.randn(v.shape, generator=generator, dtype=v.dtype)
            for k, v in upd.update.items()
        }
        return cast(R, dataclasses.replace(upd, update=new))


@dataclass(frozen=True)
class ClipNorm:
    """Scale the whole update down to Euclidean norm at most ``max_norm``.

    Clipping the whole update is one global rescaling: exact decoders that infer the scale
    (the erasure decoder does, from its single-sample rows) are not slowed by it. Per-sample
    clipping with noise (DP-SGD) is a training-time defense, see :mod:`trainleak.systems.training`.
    """

    max_norm: float = param(gt=0)

    def __post_init__(self) -> None:
        check_fields(self)

    def __call__(self, release: R, generator: torch.Generator) -> R:
        upd = _as_update(release, "ClipNorm")
        factor = min(1.0, self.max_norm / max(_norm(upd.update), 1e-300))
        return cast(
            R, dataclasses.replace(upd, update={k: v * factor for k, v in upd.update.items()})
        )


@dataclass(frozen=True)
class Quantize:
    """Quantise each tensor to ``bits`` bits on a uniform grid over ``[-max|v|, max|v|]``.

    ``mode="nearest"`` rounds; ``"stochastic"`` rounds up with probability equal to the
    fractional part (unbiased, as QSGD). ``bits=16`` with ``mode="half"`` casts to float16
    and back instead.
    """

    bits: int = param(ge=1, le=32, integer=True)
    mode: QuantizeMode = param("nearest", choices=QuantizeMode)

    def __post_init__(self) -> None:
        check_fields(self)

    def _one(self, v: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.mode == "half":
            return v.to(torch.float16).to(v.dtype)
        top = float(v.abs().max())
        if top == 0:
            return v.clone()
        levels = 2 ** (self.bits - 1) - 1 if self.bits > 1 else 1
        scaled = v / top * levels
        if self.mode == "stochastic":
            low = torch.floor(scaled)
            up = torch.rand(v.shape, generator=generator, dtype=v.dtype) < (scaled - low)
            q = low + up.to(v.dtype)
        else:
            q = torch.round(scaled)
        return q * top / levels

    def __call__(self, release: R, generator: torch.Generator) -> R:
        upd = _as_update(release, "Quantize")
        new = {k: self._one(v, generator) for k, v in upd.update.items()}
        return cast(R, dataclasses.replace(upd, update=new))
