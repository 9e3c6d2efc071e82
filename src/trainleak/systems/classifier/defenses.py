"""Training-time defenses against model inversion, each a loss option of the classifier
simulator with its own knobs (defaults: the seed briefs' small-scale settings).

Radii are on the ``[0, 1]`` pixel scale (half the seeds' ``[-1, 1]`` numbers: AT eps 0.05 is
the seed's 0.1, AT-AT eps 0.005 and step 0.001 are its digit-scale 0.01 and 0.002).

Every option maps ``(model, x, y)`` to the training loss of one batch:

* :class:`Standard`: cross-entropy.
* :class:`MixUp`: convex mixtures of pairs of inputs and their labels (Zhang et al. 2018).
* :class:`AdversarialTraining`: cross-entropy on untargeted l-inf PGD inputs (Madry et al.
  2018); seed 3 and Mejia et al. 2019: it *raises* inversion leakage.
* :class:`ATAT`: anti-adversarial training (seed 8): clean cross-entropy plus a small weight
  times the cross-entropy toward a random wrong class ``t`` on a *targeted* PGD input with a
  tiny radius, so the model is rewarded for being steerable by imperceptible perturbations.
* :class:`NegativeLabelSmoothing`: smoothing with a negative factor (Struppek et al. 2024).
* :class:`BiDO`: cross-entropy + ``lambda_x`` HSIC(X, Z) - ``lambda_y`` HSIC(Y, Z) on the
  penultimate features (Peng et al. 2022).
* :class:`MID`: cross-entropy + ``beta`` KL of a stochastic bottleneck (Wang et al. 2021); needs
  the ``mid_mlp`` architecture.
* :class:`TransferFreeze`: pre-train on the public classes, freeze the first layers, fine-tune
  the rest on the private classes (TL-DMI, Ho et al. 2024).

References:
    Torp, Smith and Breuer, ICLR 2026 (AT-AT; code defaults in BreuerLabs/Anti-Adversarial-
    Training, ``defenses/adversarial_train.py``).
    Struppek, Hintersdorf and Kersting, "Be Careful What You Smooth For: Label Smoothing Can Be
    a Privacy Shield but Also a Catalyst for Model Inversion Attacks", ICLR 2024.
    Ho, Hao, Huang, Cheung, "Model Inversion Robustness: Can Transfer Learning Help?", CVPR 2024.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainleak.errors import ConfigError
from trainleak.metrics.hsic import hsic, hsic_labels
from trainleak.models.adversarial import pgd
from trainleak.models.embedding import embed
from trainleak.validation import check_fields, param

Box = tuple[float, float]


@dataclass(frozen=True, kw_only=True)
class Standard:
    """Plain cross-entropy (the undefended model; with long training, the memorising one)."""

    name: ClassVar[str] = "standard"

    def __post_init__(self) -> None:
        check_fields(self)

    def loss(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, box: Box, gen: torch.Generator
    ) -> torch.Tensor:
        """The batch loss."""
        return F.cross_entropy(model(x), y)

    def at_step(self, step: int, steps: int) -> Standard:
        """The defense in force at training step ``step`` of ``steps`` (itself: no schedule)."""
        return self


@dataclass(frozen=True, kw_only=True)
class MixUp(Standard):
    """MixUp with mixing weight drawn from Beta(alpha, alpha)."""

    name: ClassVar[str] = "mixup"
    alpha: float = param(1.0, gt=0)

    def loss(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, box: Box, gen: torch.Generator
    ) -> torch.Tensor:
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=gen.device))
        lam = float(np.random.default_rng(seed).beta(self.alpha, self.alpha))
        perm = torch.randperm(len(x), generator=gen, device=gen.device).to(x.device)
        out = model(lam * x + (1 - lam) * x[perm])
        return lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])


@dataclass(frozen=True, kw_only=True)
class AdversarialTraining(Standard):
    """PGD adversarial training: ``clean_weight * CE(x) + CE(pgd(x))``."""

    name: ClassVar[str] = "at"
    eps: float = param(0.05, gt=0)
    step: float = param(0.0125, gt=0)
    steps: int = param(10, ge=1, integer=True)
    clean_weight: float = param(0.0, ge=0)

    def loss(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, box: Box, gen: torch.Generator
    ) -> torch.Tensor:
        adv = pgd(
            model, x, y, eps=self.eps, step=self.step, steps=self.steps, box=box, generator=gen
        )
        out = F.cross_entropy(model(adv), y)
        return out + self.clean_weight * F.cross_entropy(model(x), y) if self.clean_weight else out


@dataclass(frozen=True, kw_only=True)
class ATAT(Standard):
    """Anti-adversarial training: ``CE(x, y) + weight * CE(x_t, t)`` with ``x_t`` a targeted
    PGD input toward a uniformly random wrong class ``t`` (``t = y`` is moved to ``y + 1``)."""

    name: ClassVar[str] = "atat"
    eps: float = param(0.005, gt=0)
    step: float = param(0.001, gt=0)
    steps: int = param(5, ge=1, integer=True)
    weight: float = param(0.08, gt=0)

    def loss(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, box: Box, gen: torch.Generator
    ) -> torch.Tensor:
        out = model(x)
        c = int(out.shape[1])
        t = torch.randint(0, c, y.shape, generator=gen, device=gen.device).to(y.device)
        t = torch.where(t == y, (t + 1) % c, t)
        adv = pgd(
            model,
            x,
            t,
            eps=self.eps,
            step=self.step,
            steps=self.steps,
            box=box,
            targeted=True,
            generator=gen,
        )
        return F.cross_entropy(out, y) + self.weight * F.cross_entropy(model(adv), t)


@dataclass(frozen=True, kw_only=True)
class NegativeLabelSmoothing(Standard):
    """Label smoothing with factor ``alpha`` (negative: the targets push other classes down).

    ``warmup``: Struppek et al.'s schedule as a share of training: no smoothing for the first
    ``warmup`` of the steps, then ``alpha`` reached linearly over the next ``warmup / 2``
    (their 50 / 25 of 100 epochs at 0.5). Negative smoothing has no lower bound (the loss falls
    without end as the other logits diverge), so from the first step it drives the logits of a
    small model to huge values before it has learned the classes; 0 turns the schedule off.
    """

    name: ClassVar[str] = "negls"
    alpha: float = param(-0.05, gt=-1, lt=1)
    warmup: float = param(0.5, ge=0, lt=1)

    def at_step(self, step: int, steps: int) -> Standard:
        if not self.warmup:
            return self
        frac = step / max(steps, 1)
        ramp = min(max((frac - self.warmup) / (self.warmup / 2), 0.0), 1.0)
        return NegativeLabelSmoothing(alpha=self.alpha * ramp, warmup=0.0)

    def loss(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, box: Box, gen: torch.Generator
    ) -> torch.Tensor:
        out = model(x)
        c = int(out.shape[1])
        target = (1 - self.alpha) * F.one_hot(y, c).to(out) + self.alpha / c
        return -(target * F.log_softmax(out, 1)).sum(1).mean()


@dataclass(frozen=True, kw_only=True)
class BiDO(Standard):
    """Bilateral dependency optimisation with Gaussian-kernel HSIC (median bandwidths)."""

    name: ClassVar[str] = "bido"
    lambda_x: float = param(0.05, ge=0)
    lambda_y: float = param(0.5, ge=0)

    def loss(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, box: Box, gen: torch.Generator
    ) -> torch.Tensor:
        out, z = model(x), embed(model, x)
        c = int(out.shape[1])
        dep_x = hsic(x.flatten(1), z)
        dep_y = hsic_labels(y, z, c)
        return F.cross_entropy(out, y) + self.lambda_x * dep_x - self.lambda_y * dep_y


@dataclass(frozen=True, kw_only=True)
class MID(Standard):
    """Mutual-information regularisation: ``CE + beta * KL(bottleneck || N(0, I))``."""

    name: ClassVar[str] = "mid"
    beta: float = param(0.01, ge=0)

    def loss(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, box: Box, gen: torch.Generator
    ) -> torch.Tensor:
        out = model(x)
        kl = getattr(model, "kl", None)
        if not isinstance(kl, torch.Tensor):
            raise ConfigError("the MID defense needs the 'mid_mlp' architecture (a bottleneck)")
        return F.cross_entropy(out, y) + self.beta * kl


@dataclass(frozen=True, kw_only=True)
class TransferFreeze(Standard):
    """TL-DMI: pre-train on the public classes, freeze the first ``frozen`` layers, fine-tune
    the rest on the private classes with cross-entropy (needs an ``mlp`` architecture)."""

    name: ClassVar[str] = "tl"
    frozen: int = param(1, ge=1, integer=True)
    pretrain_steps: int = param(400, ge=1, integer=True)


Defense = (
    Standard
    | MixUp
    | AdversarialTraining
    | ATAT
    | NegativeLabelSmoothing
    | BiDO
    | MID
    | TransferFreeze
)
