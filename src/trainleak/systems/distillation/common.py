"""What every distillation algorithm shares: its base config, the synthetic set's
initialisation (real images or noise), class-balanced real batches, and the run record.

The synthetic set is held class-major: images ``c * ipc .. (c + 1) * ipc - 1`` have label
``c``. After every update the images are projected back into the data's value range, so the
released set always lies inside the range it declares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import torch

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.spec import ModelSpec
from trainleak.releases.distilled import DistilledSet
from trainleak.validation import check_fields, param

Init = Literal["real", "noise"]


@dataclass(frozen=True, kw_only=True)
class DistillConfig:
    """Hyper-parameters every algorithm has.

    Args:
        ipc: synthetic images per class (1, 10 and 50 in the literature).
        init: ``real`` starts from randomly chosen real images of each class, ``noise`` from
            Gaussian noise around the middle of the value range.
        iterations: outer iterations (image updates for DM and MTT, network draws for DC).
        lr_img: learning rate of the images (SGD with ``momentum``) on the normalised gradient
            (see :func:`normalise_gradient`): about the RMS pixel change of one step.
        momentum: momentum of the image optimiser.
        batch_real: real images per class in each comparison (at most the smallest class):
            the default takes whole classes of a small data set, so the real side of each
            comparison is the class's own statistic rather than a noisy estimate of it.
        augment: differentiable siamese augmentation (DSA) on both sides of each comparison.
    """

    name: ClassVar[str] = ""

    ipc: int = param(10, ge=1, integer=True)
    init: Init = param("real", choices=Init)
    iterations: int = param(200, ge=0, integer=True)
    lr_img: float = param(0.003, gt=0)
    momentum: float = param(0.5, ge=0, lt=1)
    batch_real: int = param(256, ge=1, integer=True)
    augment: bool = False

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class DistillationRun:
    """A distillation's output: the release and what only the distiller knows.

    Attributes:
        release: the distilled set (what is published).
        algorithm: the algorithm's name.
        architecture: the architecture it was distilled with.
        seed: the seed of the run.
        init_indices: for a real initialisation, the index (into the distiller's data) of
            the real image each synthetic image started from; ``None`` for noise. Ground
            truth for scoring: it never reaches an attack.
        trace: the matching loss, one record per logged iteration.
    """

    release: DistilledSet
    algorithm: str
    architecture: ModelSpec
    seed: int
    init_indices: torch.Tensor | None = None
    trace: list[dict[str, float]] = field(default_factory=list)


def normalise_gradient(syn: torch.Tensor) -> None:
    """Divide the images' gradient by its root mean square over the whole set, in place.

    [inferred] Our departure from the original algorithms (plain SGD on the raw gradient): the
    raw gradients of the matching losses differ by orders of magnitude between architectures
    (and, for DM, between images-per-class settings), so one learning rate cannot suit them
    all; after normalisation ``lr_img`` is the RMS pixel change of one step, and how far a
    real-initialised image can drift is set by ``lr_img`` and the number of steps alone.
    """
    if syn.grad is not None:
        syn.grad.div_(syn.grad.pow(2).mean().sqrt().clamp_min(1e-12))


def class_indices(y: torch.Tensor, num_classes: int) -> list[torch.Tensor]:
    """The indices of each class in ``y``.

    Raises:
        ConfigError: when a class has no example.
    """
    out = [torch.nonzero(y == c).flatten() for c in range(num_classes)]
    empty = [c for c, idx in enumerate(out) if idx.numel() == 0]
    if empty:
        raise ConfigError.invalid(
            "y", "at least one real example of every class", f"none of {empty}"
        )
    return out


def check_data(x: torch.Tensor, y: torch.Tensor, num_classes: int) -> None:
    """Raise unless ``x`` is ``(n, C, H, W)`` with ``n`` hard labels in ``[0, num_classes)``."""
    if x.ndim != 4 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ShapeError(f"expected x (n, C, H, W) and y (n,), received {x.shape} and {y.shape}")
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ConfigError.invalid(
            "y", f"labels in [0, {num_classes})", (int(y.min()), int(y.max()))
        )


def initial_images(
    x: torch.Tensor,
    by_class: list[torch.Tensor],
    cfg: DistillConfig,
    value_range: tuple[float, float],
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The starting synthetic images ``(K * ipc, C, H, W)`` and, for a real start, their indices.

    Raises:
        ConfigError: a real start with a class that has fewer than ``ipc`` images.
    """
    lo, hi = value_range
    k = len(by_class)
    if cfg.init == "noise":
        noise = torch.randn(k * cfg.ipc, *x.shape[1:], generator=generator)
        return ((lo + hi) / 2 + noise.to(x.device) * (hi - lo) / 4).clamp(lo, hi), None
    picks = []
    for c, idx in enumerate(by_class):
        if idx.numel() < cfg.ipc:
            raise ConfigError.invalid(
                "ipc", f"at most {idx.numel()} (the real images of class {c})", cfg.ipc
            )
        picks.append(idx[torch.randperm(idx.numel(), generator=generator)[: cfg.ipc]])
    chosen = torch.cat(picks)
    return x[chosen].clone(), chosen


def real_batch(
    x: torch.Tensor, by_class: list[torch.Tensor], per_class: int, generator: torch.Generator
) -> torch.Tensor:
    """``(K, b, C, H, W)``: ``b = min(per_class, smallest class)`` random images of each class."""
    b = min(per_class, min(int(idx.numel()) for idx in by_class))
    picks = [idx[torch.randperm(idx.numel(), generator=generator)[:b]] for idx in by_class]
    return x[torch.stack(picks)]


def synthetic_labels(num_classes: int, ipc: int) -> torch.Tensor:
    """Class-major hard labels ``(K * ipc,)``."""
    return torch.arange(num_classes).repeat_interleave(ipc)


def seed_from(generator: torch.Generator) -> int:
    """A fresh integer seed drawn from ``generator`` (for network initialisations)."""
    return int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
