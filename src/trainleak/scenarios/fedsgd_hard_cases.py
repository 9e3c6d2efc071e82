"""Hard FedSGD cases for the erasure certificate (tests and ``benchmarks/false_certificates.py``).

Each family puts the certificate where a small residual proves little:

* ``near-duplicate``: two samples of one label differing by at most ``distance`` per
  coordinate (the update is then nearly that of their mean, twice);
* ``quantised``: 8-bit inputs (multiples of 1/255), two of them one grey level apart in one
  pixel, same label;
* ``mixture``: a batch of two near-identical samples (``B = 2``), or a batch holding the
  midpoint of two of its samples under their common label;
* ``ill-conditioned``: passive, a first layer whose singular values fall to 1e-6 and with two
  nearly parallel neurons; active, two imprint groups on nearly the same projection.

Everything is built in float64 from a seed; nothing here is seen by an attack except the
release and the knowledge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from trainleak.models.registry import build_model, model_spec
from trainleak.models.spec import ModelSpec, StateDict
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.federated.client import fedsgd_update
from trainleak.systems.federated.malicious import malicious_mlp

Family = Literal["near-duplicate", "quantised", "mixture", "ill-conditioned"]
Mode = Literal["active", "passive"]
FAMILIES: tuple[Family, ...] = ("near-duplicate", "quantised", "mixture", "ill-conditioned")
CLASSES = 3


@dataclass(frozen=True)
class HardCase:
    """One update with its private batch (the batch is for scoring only)."""

    family: Family
    mode: Mode
    update: GradientUpdate
    knowledge: Knowledge
    x: torch.Tensor
    y: torch.Tensor
    detail: str


def _near_pair(x: torch.Tensor, distance: float, gen: torch.Generator) -> torch.Tensor:
    """A copy of ``x`` moved by at most ``distance`` per coordinate, kept in [0, 1]."""
    step = distance * (2 * torch.rand(x.shape, generator=gen, dtype=x.dtype) - 1)
    return (x + step).clamp(0, 1)


def _batch(
    family: Family, b: int, d: int, distance: float, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """The private batch of a family: ``b`` inputs in [0, 1]^d and labels."""
    x = torch.rand(b, d, generator=gen, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (b,), generator=gen)
    if family == "quantised":
        x = torch.round(x * 255) / 255
        pix = int(torch.randint(0, d, (1,), generator=gen))
        x[1] = x[0]
        x[1, pix] = x[0, pix] + (1 / 255 if float(x[0, pix]) < 0.5 else -1 / 255)
        y[1] = y[0]
    elif family == "mixture" and b >= 3:
        x[2] = (x[0] + x[1]) / 2
        y[1] = y[2] = y[0]
    elif family in ("near-duplicate", "mixture") and b >= 2:
        x[1] = _near_pair(x[0], distance, gen)
        y[1] = y[0]
    return x, y


def _honest(d: int, width: int, seed: int, ill: bool) -> tuple[ModelSpec, StateDict]:
    spec = model_spec("mlp", input_shape=(d,), hidden=[width], out_dim=CLASSES)
    params = {k: v.double() for k, v in build_model(spec, seed=seed).state_dict().items()}
    if ill:
        w = params["layers.0.weight"]
        u, _, vh = torch.linalg.svd(w, full_matrices=False)
        s = torch.logspace(0, -6, u.shape[1], dtype=torch.float64) * float(w.norm()) / 4
        w = u @ torch.diag(s) @ vh
        w[1] = w[0] + 1e-6 * w[1] / float(w[1].norm())  # two nearly parallel neurons
        params["layers.0.weight"] = w
    return spec, params


def _imprint(d: int, b: int, seed: int, ill: bool) -> tuple[ModelSpec, StateDict]:
    gen = torch.Generator().manual_seed(seed + 7)
    public = torch.rand(200, d, generator=gen, dtype=torch.float64)
    bins = max(8, math.ceil(2 * b / 3))
    spec, params = malicious_mlp(
        (d,), CLASSES, public, n_groups=3, bins_per_group=bins, hidden=8, seed=seed
    )
    if ill:  # group 2 on nearly the projection of group 1 (same thresholds' quantiles)
        w = params["layers.0.weight"]
        r = w[0] + 1e-6 * torch.randn(d, generator=gen, dtype=torch.float64)
        r = r / r.norm()
        s_old, s_new = public @ w[bins], public @ r
        shift = float(s_new.mean() - s_old.mean())
        w[bins : 2 * bins] = r
        params["layers.0.bias"][bins : 2 * bins] -= shift
        params["layers.0.weight"] = w
    return spec, params


def make_case(
    family: Family,
    mode: Mode,
    seed: int,
    *,
    batch: int = 8,
    dim: int = 12,
    distance: float = 5e-5,
    width: int = 64,
) -> HardCase:
    """One case of ``family`` in ``mode``.

    Args:
        family: see the module docstring (``mixture`` with ``batch == 2`` is the pair form).
        mode: ``"active"`` (3-group imprint layer) or ``"passive"`` (honest MLP at init).
        seed: seed of the batch and the model.
        batch: batch size ``B``.
        dim: input dimension.
        distance: per-coordinate distance of the near-duplicate pair.
        width: first-layer width of the honest MLP.
    """
    gen = torch.Generator().manual_seed(10_000 + seed)
    x, y = _batch(family, batch, dim, distance, gen)
    ill = family == "ill-conditioned"
    if mode == "active":
        spec, params = _imprint(dim, batch, seed, ill)
    else:
        spec, params = _honest(dim, width, seed, ill)
    update = fedsgd_update(spec, params, x, y)
    kn = Knowledge(input_shape=(dim,), value_range=(0.0, 1.0), active=mode == "active")
    detail = f"B={batch} d={dim} distance={distance:g}"
    return HardCase(family, mode, update, kn, x, y, detail)
