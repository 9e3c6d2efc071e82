"""Targets, evaluators and the prior of the model-inversion experiments, each trained once per
content hash (task data, architecture, defense and its knobs, settings, seed).

Targets: an MLP (two hidden layers of 256) with every defense; MID uses the bottleneck MLP,
the drop-layer model the masked MLP keeping 3 % of pixels, the memorising model the plain MLP
trained ``memorise_factor`` times longer. Evaluators: a ConvNet (a different architecture from
the targets), one trained with cross-entropy and one with PGD adversarial training (eps 0.05,
5 steps of 0.02), both on the private training split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from trainleak.errors import ConfigError
from trainleak.metrics.inversion import AttackAccuracy, attack_accuracy
from trainleak.models.fitting import accuracy
from trainleak.models.registry import model_spec
from trainleak.models.spec import ModelSpec
from trainleak.releases.classifier import ClassifierRelease, GenerativePrior
from trainleak.scenarios.inversion import (
    BOX,
    InversionTask,
    cache_key,
    cached_classifier,
    cached_prior,
    check_evaluator,
)
from trainleak.systems.classifier import (
    ATAT,
    MID,
    AdversarialTraining,
    BiDO,
    Defense,
    MixUp,
    NegativeLabelSmoothing,
    PriorSettings,
    Standard,
    TrainSettings,
    TransferFreeze,
    train_classifier,
    train_prior,
)

TargetName = Literal[
    "standard", "mixup", "at", "atat", "negls", "bido", "mid", "tl", "memorise", "droplayer"
]
TARGETS: tuple[TargetName, ...] = (
    "standard",
    "mixup",
    "at",
    "atat",
    "negls",
    "bido",
    "mid",
    "tl",
    "memorise",
    "droplayer",
)
HIDDEN = [256, 256]


@dataclass(frozen=True)
class Recipe:
    """How one target is trained."""

    name: str
    spec: ModelSpec
    defense: Defense
    settings: TrainSettings


def recipe(
    name: str,
    task: InversionTask,
    steps: int,
    *,
    atat_eps: float = 0.005,
    atat_weight: float = 0.08,
    memorise_factor: int = 5,
    negls_warmup: float = 0.5,
    flip: bool = False,
) -> Recipe:
    """The recipe of target ``name`` (one of :data:`TARGETS`); ``negls_warmup`` is Neg-LS's
    schedule (:class:`~trainleak.systems.classifier.NegativeLabelSmoothing`); ``flip`` trains
    every target on random mirror images too (faces)."""
    shape, c = task.input_shape, task.num_classes
    mlp = model_spec("mlp", input_shape=shape, hidden=HIDDEN, out_dim=c)
    plain = TrainSettings(steps=steps, flip=flip)
    defenses: dict[str, Defense] = {
        "standard": Standard(),
        "mixup": MixUp(),
        "at": AdversarialTraining(),
        "atat": ATAT(eps=atat_eps, step=atat_eps / 5, weight=atat_weight),
        "negls": NegativeLabelSmoothing(warmup=negls_warmup),
        "bido": BiDO(),
        "mid": MID(),
        "tl": TransferFreeze(pretrain_steps=steps),
    }
    if name in defenses:
        spec = (
            model_spec("mid_mlp", input_shape=shape, hidden=HIDDEN, out_dim=c)
            if name == "mid"
            else mlp
        )
        return Recipe(name, spec, defenses[name], plain)
    if name == "memorise":
        return Recipe(
            name, mlp, Standard(), TrainSettings(steps=steps * memorise_factor, flip=flip)
        )
    if name == "droplayer":
        spec = model_spec("masked_mlp", input_shape=shape, hidden=HIDDEN, out_dim=c, keep=0.03)
        return Recipe(name, spec, Standard(), plain)
    raise ConfigError.invalid("target", f"one of {list(TARGETS)}", name)


@dataclass(frozen=True)
class Target:
    """A trained target and its clean test accuracy."""

    recipe: Recipe
    release: ClassifierRelease
    clean_accuracy: float


def train_target(task: InversionTask, rec: Recipe, seed: int, cache: Path | None) -> Target:
    """Train (or load) the target of ``rec``."""
    key = cache_key("target", task.content_hash(), rec.spec, rec.defense, rec.settings, seed)

    def build() -> ClassifierRelease:
        return train_classifier(
            *task.private,
            task.classes,
            rec.spec,
            defense=rec.defense,
            settings=rec.settings,
            value_range=BOX,
            seed=seed,
            public=task.public,
        ).release

    release = cached_classifier(key, build, cache)
    return Target(rec, release, accuracy(release.model(), *task.test))


def train_evaluators(
    task: InversionTask, steps: int, seed: int, cache: Path | None, width: int = 16
) -> dict[str, ClassifierRelease]:
    """The ``standard`` and ``robust`` (PGD-trained) ConvNet evaluators, on the private split."""
    spec = model_spec(
        "convnet", input_shape=task.input_shape, out_dim=task.num_classes, width=width
    )
    out = {}
    robust = AdversarialTraining(eps=0.05, step=0.02, steps=5)
    for name, defense in (("standard", Standard()), ("robust", robust)):
        settings = TrainSettings(steps=steps)
        key = cache_key("evaluator", task.content_hash(), spec, defense, settings, seed)

        def build(d: Defense = defense, s: TrainSettings = settings) -> ClassifierRelease:
            return train_classifier(
                *task.private,
                task.classes,
                spec,
                defense=d,
                settings=s,
                value_range=BOX,
                seed=seed + 7,
            ).release

        ev = cached_classifier(key, build, cache)
        check_evaluator(ev, task)
        out[name] = ev
    return out


def task_prior(
    task: InversionTask, settings: PriorSettings, seed: int, cache: Path | None
) -> GenerativePrior:
    """The VAE prior on the public split (cached)."""
    key = cache_key("prior", task.content_hash(), settings, seed)
    return cached_prior(
        key,
        lambda: train_prior(
            task.public[0], settings, value_range=BOX, public_classes=task.public_classes, seed=seed
        ),
        cache,
    )


def score(
    images: torch.Tensor,
    labels: torch.Tensor,
    evaluators: dict[str, ClassifierRelease],
    num_classes: int,
    seed: int = 0,
) -> dict[str, AttackAccuracy]:
    """Acc@1/Acc@5 of every evaluator on the reconstructions."""
    return {
        name: attack_accuracy(ev.model(), images, labels, num_classes, seed=seed)
        for name, ev in evaluators.items()
    }
