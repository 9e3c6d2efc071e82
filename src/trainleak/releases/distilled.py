"""The :class:`DistilledSet` release: a synthetic data set published instead of the real one.

Dataset distillation (DC, DM, MTT, ...) condenses a private training set into a few synthetic
images per class; the synthetic set is then shared, often in the belief that it is private.
What leaves the pipeline is the images, their labels (hard, or soft class probabilities) and,
for trajectory matching, the learned learning rate. Neither the algorithm nor the architecture
it was distilled with is released: inferring them is the first step of the information
revelation attack (:mod:`trainleak.attacks.distillation`).

A :class:`ShadowBank` is the adversary's own collection of distilled sets, each labelled with
the (algorithm, architecture, seed) that produced it from auxiliary data; it is part of the
adversary's knowledge (:class:`~trainleak.releases.knowledge.Knowledge`).

Sets are saved as ``set.safetensors`` (images, labels) and ``set.json`` (the rest); loading
never unpickles anything.

References:
    Chen, Zhu, Zhong, Zhang, Wang, He, Zhang, Shen, Wang and Zhou, "Turning Black Box into White
    Box: Dataset Distillation Leaks", arXiv 2603.01053, 2026 (the information revelation attack;
    its pipeline is [inferred] from the abstract, ``../shared/docs/seed-briefs-2.md`` section 13).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.registry import build_model
from trainleak.models.spec import ModelSpec, metadata_of, read_release_dir
from trainleak.releases.base import Release

_RANGE_TOL = 1e-5


@dataclass(frozen=True)
class DistilledSet(Release):
    """A released synthetic data set.

    Attributes:
        images: ``(N, C, H, W)`` floating tensor, every value inside ``value_range``.
        labels: hard labels ``(N,)`` (int64 in ``[0, num_classes)``) or soft labels
            ``(N, num_classes)`` (non-negative rows summing to 1).
        num_classes: the number of classes of the task.
        value_range: the declared box ``(low, high)`` the images live in.
        lr: the learned learning rate published with the set (trajectory matching), if any.

    Raises:
        ShapeError: images not 4-D, or labels that do not match the images.
        ConfigError: labels outside ``[0, num_classes)``, soft labels that are not
            distributions, non-finite images, images outside ``value_range``, a bad range or
            a non-positive ``lr``.
    """

    images: torch.Tensor
    labels: torch.Tensor
    num_classes: int
    value_range: tuple[float, float] = (0.0, 1.0)
    lr: float | None = None

    def __post_init__(self) -> None:
        if self.images.ndim != 4 or not self.images.is_floating_point():
            raise ShapeError(
                f"DistilledSet.images must be floating (N, C, H, W), received "
                f"{tuple(self.images.shape)} of {self.images.dtype}"
            )
        if isinstance(self.num_classes, bool) or int(self.num_classes) < 2:
            raise ConfigError.invalid("num_classes", "an integer >= 2", self.num_classes)
        self._check_labels()
        self._check_range()
        if self.lr is not None and not float(self.lr) > 0:
            raise ConfigError.invalid("lr", "None or a positive number", self.lr)

    def _check_labels(self) -> None:
        n, k, lab = int(self.images.shape[0]), int(self.num_classes), self.labels
        if lab.ndim == 1 and not lab.is_floating_point():
            if lab.shape[0] != n:
                raise ShapeError(f"DistilledSet has {n} images but {lab.shape[0]} labels")
            if n and (int(lab.min()) < 0 or int(lab.max()) >= k):
                raise ConfigError.invalid(
                    "labels", f"hard labels in [0, {k})", f"[{int(lab.min())}, {int(lab.max())}]"
                )
            return
        if lab.ndim != 2 or not lab.is_floating_point() or tuple(lab.shape) != (n, k):
            raise ShapeError(
                f"DistilledSet labels must be hard ({n},) integers or soft ({n}, {k}) "
                f"probabilities to match {n} images of {k} classes, received "
                f"{tuple(lab.shape)} of {lab.dtype}"
            )
        if n and (float(lab.min()) < 0 or not torch.allclose(lab.sum(1), torch.ones(n).to(lab))):
            raise ConfigError.invalid("labels", "soft labels: non-negative rows summing to 1", lab)

    def _check_range(self) -> None:
        lo, hi = (float(v) for v in self.value_range)
        if not hi > lo:
            raise ConfigError.invalid(
                "value_range", "(low, high) with high > low", self.value_range
            )
        if not bool(torch.isfinite(self.images).all()):
            raise ConfigError.invalid("images", "finite values", "NaN or inf")
        if self.images.numel():
            mn, mx = float(self.images.min()), float(self.images.max())
            tol = _RANGE_TOL * (hi - lo)
            if mn < lo - tol or mx > hi + tol:
                raise ConfigError.invalid(
                    "images", f"values inside the declared value_range [{lo}, {hi}]", (mn, mx)
                )

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one image, ``(C, H, W)``."""
        return tuple(int(s) for s in self.images.shape[1:])

    @property
    def soft(self) -> bool:
        """Whether the labels are soft (class probabilities)."""
        return self.labels.ndim == 2

    @property
    def hard_labels(self) -> torch.Tensor:
        """Hard labels ``(N,)``: the labels themselves, or the argmax of soft labels."""
        return self.labels.argmax(1) if self.soft else self.labels

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def describe(self) -> str:
        kind = "soft" if self.soft else "hard"
        lr = f", lr={self.lr:.3g}" if self.lr is not None else ""
        return f"DistilledSet({len(self)} images {self.input_shape}, {kind} labels{lr})"

    def content_hash(self) -> str:
        """SHA-256 of the images, labels, class count, range and lr (a cache key)."""
        h = hashlib.sha256()
        for t in (self.images, self.labels):
            h.update(str((tuple(t.shape), t.dtype)).encode())
            h.update(t.detach().contiguous().cpu().numpy().tobytes())
        h.update(repr((self.num_classes, tuple(self.value_range), self.lr)).encode())
        return h.hexdigest()

    def save(self, directory: str | Path) -> Path:
        """Write ``set.safetensors`` and ``set.json`` into ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {"images": self.images.detach().contiguous().cpu()}
        tensors["labels"] = self.labels.detach().contiguous().cpu()
        save_file(tensors, str(out / "set.safetensors"))
        meta = {
            "format": "trainleak.distilled/1",
            "num_classes": int(self.num_classes),
            "value_range": [float(v) for v in self.value_range],
            "lr": self.lr,
        }
        (out / "set.json").write_text(json.dumps(meta, indent=2))
        return out

    @classmethod
    def load(cls, directory: str | Path) -> DistilledSet:
        """Load a directory written by :meth:`save` (checked like any new release).

        Raises:
            FileNotFoundError: the directory or one of its files is missing.
        """
        p = Path(directory)
        tensors, meta = read_release_dir(p, "set.safetensors", "set.json", "distilled-set")
        with metadata_of(p / "set.json"):
            return cls(
                images=tensors["images"],
                labels=tensors["labels"],
                num_classes=int(meta["num_classes"]),
                value_range=(float(meta["value_range"][0]), float(meta["value_range"][1])),
                lr=None if meta.get("lr") is None else float(meta["lr"]),
            )


@dataclass(frozen=True)
class ShadowSet:
    """One entry of the adversary's shadow bank: a set it distilled itself, with its labels.

    Attributes:
        release: the distilled set.
        algorithm: the distillation algorithm that produced it (e.g. ``"dm"``).
        architecture: the architecture kind it was distilled with (e.g. ``"convnet"``).
        seed: the distillation seed.
        info: anything else the builder recorded (auxiliary half, init, ...).
    """

    release: DistilledSet
    algorithm: str
    architecture: str
    seed: int = 0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ShadowBank:
    """Shadow distilled sets over (algorithm, architecture, seed), all of one task.

    Raises:
        ConfigError: an empty bank, or sets of different image shapes, class counts or ranges.
    """

    sets: tuple[ShadowSet, ...]

    def __post_init__(self) -> None:
        if not self.sets:
            raise ConfigError.invalid(
                "shadow_bank", "at least one shadow distilled set (the bank is empty)", 0
            )
        first = self.sets[0].release
        for s in self.sets[1:]:
            r = s.release
            if (r.input_shape, r.num_classes, r.value_range) != (
                first.input_shape,
                first.num_classes,
                first.value_range,
            ):
                raise ConfigError.invalid(
                    "shadow_bank",
                    f"sets of one task {first.input_shape}, {first.num_classes} classes, "
                    f"range {first.value_range}",
                    (r.input_shape, r.num_classes, r.value_range),
                )

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The algorithms in the bank, sorted."""
        return tuple(sorted({s.algorithm for s in self.sets}))

    @property
    def architectures(self) -> tuple[str, ...]:
        """The architecture kinds in the bank, sorted."""
        return tuple(sorted({s.architecture for s in self.sets}))

    def __len__(self) -> int:
        return len(self.sets)

    def check_release(self, release: DistilledSet) -> None:
        """Raise :class:`ConfigError` unless ``release`` is of the bank's task."""
        ref = self.sets[0].release
        if (release.input_shape, release.num_classes) != (ref.input_shape, ref.num_classes):
            raise ConfigError.invalid(
                "release",
                f"a set of the shadow bank's task: images {ref.input_shape}, "
                f"{ref.num_classes} classes",
                (release.input_shape, release.num_classes),
            )


def check_architecture(spec: ModelSpec, release: DistilledSet) -> None:
    """Raise :class:`ConfigError` unless ``spec`` takes the release's images and outputs one
    logit per class (a candidate architecture the adversary can train on the set).

    Raises:
        ConfigError: naming the candidate, when it cannot be built, cannot take images of
            the release's shape, or does not output ``num_classes`` logits.
    """
    probe = torch.zeros(2, *release.input_shape, dtype=torch.float32)
    try:
        with torch.no_grad():
            out = build_model(spec, seed=0)(probe)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ConfigError.invalid(
            "candidate_architectures",
            f"architectures that take images of shape {release.input_shape}",
            f"{spec.kind} {spec.kwargs} ({type(exc).__name__}: {str(exc).splitlines()[0]})",
        ) from None
    if tuple(out.shape) != (2, release.num_classes):
        raise ConfigError.invalid(
            "candidate_architectures",
            f"architectures with {release.num_classes} outputs",
            f"{spec.kind} with output shape {tuple(out.shape[1:])}",
        )
