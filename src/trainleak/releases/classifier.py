"""The released classifier (white box) and the adversary's generative prior.

A :class:`ClassifierRelease` is a trained classifier published with its weights, its
architecture spec, its class list and the shape and value range of its inputs; its classes are
private identities (people, for a face classifier). Model-inversion attacks
(:mod:`trainleak.attacks.inversion`) search for inputs that reveal each class.

A :class:`GenerativePrior` is part of the adversary's knowledge, never of the release: a
decoder ``z -> image`` trained on *public* data of other classes from the same domain, with its
latent size. Both save as safetensors plus a JSON spec; loading never unpickles anything.

References:
    Fredrikson, Jha and Ristenpart, "Model Inversion Attacks that Exploit Confidence
    Information and Basic Countermeasures", CCS 2015.
    Zhang et al., "The Secret Revealer: Generative Model-Inversion Attacks Against Deep Neural
    Networks", CVPR 2020.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.registry import build_model
from trainleak.models.spec import (
    ModelSpec,
    StateDict,
    metadata_of,
    read_release_dir,
    spec_from_json,
)
from trainleak.releases.base import Release

_TOL = 1e-5


def _hash_state(h: hashlib._Hash, state: StateDict) -> None:
    for k in sorted(state):
        t = state[k]
        h.update(f"{k}{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.detach().contiguous().cpu().numpy().tobytes())


def _check_box(value_range: tuple[float, float]) -> tuple[float, float]:
    lo, hi = (float(v) for v in value_range)
    if not hi > lo:
        raise ConfigError.invalid("value_range", "(low, high) with high > low", value_range)
    return lo, hi


@dataclass(frozen=True, eq=False)
class ClassifierRelease(Release):
    """A white-box classifier whose classes are private.

    Attributes:
        spec: the architecture (``models.build_model(spec)`` rebuilds it).
        state: its weights.
        classes: the class names, in output order.
        input_shape: ``(C, H, W)`` of one input.
        value_range: the box the inputs live in.

    Raises:
        ConfigError: fewer than two classes, a bad range, or an output size that differs from
            the number of classes.
        ShapeError: an input shape that is not ``(C, H, W)``.
    """

    spec: ModelSpec
    state: StateDict
    classes: tuple[str, ...]
    input_shape: tuple[int, int, int]
    value_range: tuple[float, float] = (0.0, 1.0)

    def __post_init__(self) -> None:
        if len(self.classes) < 2:
            raise ConfigError.invalid("classes", "at least two class names", self.classes)
        if len(self.input_shape) != 3 or any(int(s) < 1 for s in self.input_shape):
            raise ShapeError(
                f"ClassifierRelease.input_shape must be (C, H, W), received {self.input_shape}"
            )
        _check_box(self.value_range)
        with torch.no_grad():
            out = self.model()(torch.zeros(1, *self.input_shape))
        if out.ndim != 2 or int(out.shape[1]) != len(self.classes):
            raise ConfigError(
                f"the classifier outputs {tuple(out.shape[1:])} scores per input but the class "
                f"list has {len(self.classes)} classes; the output size must match the class list"
            )

    @property
    def num_classes(self) -> int:
        """The number of classes."""
        return len(self.classes)

    def model(self) -> nn.Module:
        """A fresh copy of the classifier, in evaluation mode."""
        return build_model(self.spec, state=self.state).eval()

    def check_inputs(self, x: torch.Tensor) -> None:
        """Refuse inputs of the wrong shape or outside the value range.

        Raises:
            ShapeError: ``x`` is not ``(n, *input_shape)``.
            ConfigError: values outside ``value_range``.
        """
        if x.ndim != 4 or tuple(x.shape[1:]) != tuple(self.input_shape):
            raise ShapeError(
                f"inputs of shape {tuple(x.shape)} do not match the classifier's input shape "
                f"(n, {', '.join(map(str, self.input_shape))})"
            )
        lo, hi = self.value_range
        tol = _TOL * (hi - lo)
        if x.numel() and (float(x.min()) < lo - tol or float(x.max()) > hi + tol):
            raise ConfigError.invalid(
                "inputs",
                f"values inside the classifier's range [{lo}, {hi}]",
                (float(x.min()), float(x.max())),
            )

    def describe(self) -> str:
        return (
            f"ClassifierRelease({self.spec.kind}, {self.num_classes} classes, "
            f"input {self.input_shape} in {self.value_range})"
        )

    def content_hash(self) -> str:
        """SHA-256 of the weights, spec, classes, shape and range (a cache key)."""
        h = hashlib.sha256()
        _hash_state(h, self.state)
        h.update(repr((self.spec, self.classes, self.input_shape, self.value_range)).encode())
        return h.hexdigest()

    def save(self, directory: str | Path) -> Path:
        """Write ``weights.safetensors`` and ``release.json`` into ``directory``."""
        return _save(
            directory,
            self.state,
            {
                "format": "trainleak.classifier/1",
                "spec": {"kind": self.spec.kind, "kwargs": self.spec.kwargs},
                "classes": list(self.classes),
                "input_shape": list(self.input_shape),
                "value_range": list(self.value_range),
            },
        )

    @classmethod
    def load(cls, directory: str | Path) -> ClassifierRelease:
        """Load what :meth:`save` wrote (checked like a new release)."""
        d = Path(directory)
        state, meta = read_release_dir(d, "weights.safetensors", "release.json", "release")
        with metadata_of(d / "release.json"):
            return cls(
                spec=spec_from_json(meta["spec"], "spec"),
                state=state,
                classes=tuple(str(c) for c in meta["classes"]),
                input_shape=tuple(int(s) for s in meta["input_shape"]),  # type: ignore[arg-type]
                value_range=(float(meta["value_range"][0]), float(meta["value_range"][1])),
            )


@dataclass(frozen=True, eq=False)
class GenerativePrior:
    """A decoder ``z -> image`` trained on public data (the adversary's image prior).

    Attributes:
        spec: the decoder's architecture (kind ``"vae_decoder"`` for the built-in VAE).
        state: its weights.
        latent_dim: size of ``z`` (drawn from a standard normal).
        input_shape: ``(C, H, W)`` of the images it produces.
        value_range: the box of its images.
        public_classes: the names of the classes it was trained on.

    Raises:
        ShapeError: the decoder's images do not have ``input_shape``.
    """

    spec: ModelSpec
    state: StateDict
    latent_dim: int
    input_shape: tuple[int, int, int]
    value_range: tuple[float, float] = (0.0, 1.0)
    public_classes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if int(self.latent_dim) < 1:
            raise ConfigError.invalid("latent_dim", "a positive integer", self.latent_dim)
        _check_box(self.value_range)
        with torch.no_grad():
            out = self.decoder()(torch.zeros(1, int(self.latent_dim)))
        if tuple(out.shape[1:]) != tuple(self.input_shape):
            raise ShapeError(
                f"the prior's decoder produces images of shape {tuple(out.shape[1:])}, not the "
                f"declared {tuple(self.input_shape)}"
            )

    def decoder(self) -> nn.Module:
        """A fresh copy of the decoder, in evaluation mode, without parameter gradients."""
        dec = build_model(self.spec, state=self.state).eval()
        for p in dec.parameters():
            p.requires_grad_(False)
        return dec

    def check_matches(self, release: ClassifierRelease) -> None:
        """Refuse a prior whose images do not fit the classifier.

        Raises:
            ShapeError: a different input shape.
            ConfigError: a different value range, or public classes named like private ones.
        """
        if tuple(self.input_shape) != tuple(release.input_shape):
            raise ShapeError(
                f"the generative prior was trained on inputs of shape {tuple(self.input_shape)} "
                f"but the classifier takes {tuple(release.input_shape)}"
            )
        if tuple(map(float, self.value_range)) != tuple(map(float, release.value_range)):
            raise ConfigError.invalid(
                "prior.value_range",
                f"the classifier's range {release.value_range}",
                self.value_range,
            )
        shared = sorted(set(self.public_classes) & set(release.classes))
        if shared:
            raise ConfigError(f"the prior was trained on private classes {shared}: a leak")

    def sample_latents(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` latents from the standard normal."""
        z = torch.randn(int(n), int(self.latent_dim), generator=generator, device=generator.device)
        return z.to(torch.get_default_device())

    def content_hash(self) -> str:
        """SHA-256 of the weights and spec (a cache key)."""
        h = hashlib.sha256()
        _hash_state(h, self.state)
        h.update(repr((self.spec, self.latent_dim, self.input_shape, self.value_range)).encode())
        h.update(repr(self.public_classes).encode())
        return h.hexdigest()

    def save(self, directory: str | Path) -> Path:
        """Write ``weights.safetensors`` and ``release.json`` into ``directory``."""
        return _save(
            directory,
            self.state,
            {
                "format": "trainleak.prior/1",
                "spec": {"kind": self.spec.kind, "kwargs": self.spec.kwargs},
                "latent_dim": int(self.latent_dim),
                "input_shape": list(self.input_shape),
                "value_range": list(self.value_range),
                "public_classes": list(self.public_classes),
            },
        )

    @classmethod
    def load(cls, directory: str | Path) -> GenerativePrior:
        """Load what :meth:`save` wrote."""
        d = Path(directory)
        state, meta = read_release_dir(d, "weights.safetensors", "release.json", "release")
        with metadata_of(d / "release.json"):
            return cls(
                spec=spec_from_json(meta["spec"], "spec"),
                state=state,
                latent_dim=int(meta["latent_dim"]),
                input_shape=tuple(int(s) for s in meta["input_shape"]),  # type: ignore[arg-type]
                value_range=(float(meta["value_range"][0]), float(meta["value_range"][1])),
                public_classes=tuple(str(c) for c in meta["public_classes"]),
            )


def _save(directory: str | Path, state: StateDict, meta: dict[str, Any]) -> Path:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.detach().contiguous().cpu() for k, v in state.items()},
        str(out / "weights.safetensors"),
    )
    (out / "release.json").write_text(json.dumps(meta, indent=2))
    return out
