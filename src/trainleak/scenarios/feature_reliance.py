"""Which feature does a classifier lean on: a visible, robust cue or an imperceptible,
non-robust one? The synthetic check of the AT-AT seed (Torp, Smith and Breuer, ICLR 2026; seed
brief section 8), after Ilyas et al., "Adversarial Examples Are Not Bugs, They Are Features",
NeurIPS 2019.

Every image carries two cues of a class on a grey background with Gaussian pixel noise:

* a **robust** cue, the class's smooth pattern (a 4 x 4 Gaussian field upsampled to the image,
  unit RMS) at amplitude ``amplitude``: visible, and far larger than any perturbation radius
  in play, but in training it shows the true class only with probability ``p_robust`` (else
  another class's pattern);
* a **non-robust** cue, the class's +-1 pixel pattern at amplitude ``delta``: imperceptible
  (``delta`` is below the AT radius, so an l-infinity adversary can erase it), and in training it
  always shows the true class.

A model's *reliance* on the non-robust cue is read on conflict images, whose robust cue shows
one class and whose non-robust cue another: the share of the predictions that name one of the
two classes that follow the non-robust cue. AT should drive it towards 0; the seed expects
AT-AT, which rewards being steered by tiny perturbations, to raise it.

[inferred] The task's numbers (16 x 16 images, 5 classes, amplitude 0.15, delta 0.015, noise
0.1, p_robust 0.9, 2000 training images) were chosen so the undefended model's reliance sits
well inside (0, 1) and a move either way is visible: with p_robust 0.8 and delta 0.02 the
standard model already followed the non-robust cue in 0.78 of conflicts. delta lies between
the experiment's AT-AT radii (0.005, 0.02) and below AT's (0.05).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from trainleak.models.registry import model_spec
from trainleak.scenarios.inversion import cache_key, cached_classifier
from trainleak.systems.classifier import Defense, TrainSettings, train_classifier
from trainleak.validation import check_fields, param

HIDDEN = [256, 256]


@dataclass(frozen=True, kw_only=True)
class TwoCueTask:
    """The synthetic two-cue task (see the module docstring).

    Args:
        num_classes: classes.
        size: image side (one channel, values in [0, 1]).
        amplitude: the robust cue's RMS amplitude.
        delta: the non-robust cue's amplitude (each pixel +-delta).
        sigma: Gaussian pixel noise.
        p_robust: probability that a training image's robust cue shows its true class.
        n_train: training images.
        n_eval: clean test images and conflict images.
    """

    num_classes: int = param(5, ge=2, integer=True)
    size: int = param(16, ge=4, integer=True)
    amplitude: float = param(0.15, gt=0)
    delta: float = param(0.015, gt=0)
    sigma: float = param(0.1, ge=0)
    p_robust: float = param(0.9, ge=0, le=1)
    n_train: int = param(2000, ge=10, integer=True)
    n_eval: int = param(1000, ge=10, integer=True)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class CueBatch:
    """Images, their labels, and the class each cue shows."""

    x: torch.Tensor
    y: torch.Tensor
    robust: torch.Tensor
    nonrobust: torch.Tensor


@dataclass(frozen=True)
class Reliance:
    """One model on the task: clean test accuracy and, on conflict images, how many
    predictions follow each cue.

    Attributes:
        clean_accuracy: accuracy on images whose cues agree with the label as in training.
        to_robust, to_nonrobust: conflict images predicted as the robust cue's class, and as
            the non-robust cue's class.
        n: conflict images.
    """

    clean_accuracy: float
    to_robust: int
    to_nonrobust: int
    n: int

    @property
    def reliance(self) -> float:
        """Share of the two-cue predictions that follow the non-robust cue (NaN if none)."""
        both = self.to_robust + self.to_nonrobust
        return self.to_nonrobust / both if both else float("nan")


def cue_patterns(task: TwoCueTask, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The robust (smooth, unit RMS) and non-robust (+-1) patterns, ``(K, 1, S, S)`` each."""
    gen = torch.Generator().manual_seed(seed)
    k, s = task.num_classes, task.size
    low = torch.randn(k, 1, 4, 4, generator=gen)
    robust = F.interpolate(low, size=(s, s), mode="bilinear", align_corners=False)
    robust = robust / robust.pow(2).mean(dim=(1, 2, 3), keepdim=True).sqrt()
    nonrobust = torch.randint(0, 2, (k, 1, s, s), generator=gen).float() * 2 - 1
    return robust, nonrobust


def draw(
    task: TwoCueTask,
    patterns: tuple[torch.Tensor, torch.Tensor],
    n: int,
    gen: torch.Generator,
    *,
    conflict: bool = False,
) -> CueBatch:
    """``n`` images. Training-like: the non-robust cue shows the label, the robust cue shows it
    with probability ``p_robust`` (else a uniformly drawn other class). Conflict: the robust
    cue shows the label and the non-robust cue a uniformly drawn other class."""
    k = task.num_classes
    y = torch.randint(0, k, (n,), generator=gen)
    other = (y + torch.randint(1, k, (n,), generator=gen)) % k
    if conflict:
        robust, nonrobust = y, other
    else:
        keep = torch.rand(n, generator=gen) < task.p_robust
        robust, nonrobust = torch.where(keep, y, other), y
    rob, non = patterns
    noise = torch.randn(n, 1, task.size, task.size, generator=gen)
    x = 0.5 + task.amplitude * rob[robust] + task.delta * non[nonrobust] + task.sigma * noise
    return CueBatch(x.clamp(0.0, 1.0), y, robust, nonrobust)


def measure_reliance(
    task: TwoCueTask,
    defense: Defense,
    settings: TrainSettings,
    seed: int,
    pattern_seed: int = 0,
    cache: Path | None = None,
) -> Reliance:
    """Train the experiment's MLP with ``defense`` on a fresh draw of the task (data and
    initialisation from ``seed``; the patterns from ``pattern_seed``) and read its reliance."""
    patterns = cue_patterns(task, pattern_seed)
    gen = torch.Generator().manual_seed(seed)
    train = draw(task, patterns, task.n_train, gen)
    test = draw(task, patterns, task.n_eval, gen)
    conflict = draw(task, patterns, task.n_eval, gen, conflict=True)
    shape = (1, task.size, task.size)
    spec = model_spec("mlp", input_shape=shape, hidden=HIDDEN, out_dim=task.num_classes)
    classes = tuple(f"class {c}" for c in range(task.num_classes))
    key = cache_key("two-cue", task, pattern_seed, spec, defense, settings, seed)
    release = cached_classifier(
        key,
        lambda: (
            train_classifier(
                train.x, train.y, classes, spec, defense=defense, settings=settings, seed=seed
            ).release
        ),
        cache,
    )
    model = release.model()
    with torch.no_grad():
        clean = float((model(test.x).argmax(1) == test.y).float().mean())
        pred = model(conflict.x).argmax(1)
    return Reliance(
        clean_accuracy=clean,
        to_robust=int((pred == conflict.robust).sum()),
        to_nonrobust=int((pred == conflict.nonrobust).sum()),
        n=task.n_eval,
    )
