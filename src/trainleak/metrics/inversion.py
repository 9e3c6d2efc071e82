"""Scores of model-inversion attacks: evaluator accuracy on the reconstructions (Acc@1/Acc@5
with bootstrap intervals, per class), a target's PGD robustness profile, and HSIC of its
penultimate features with inputs and labels.

The evaluator is a first-class choice (Struppek et al.'s protocol judges reconstructions with a
separate classifier trained on the private data; seed 3's point is that a standard and a
robust evaluator can disagree), so every score takes the evaluator as an argument.

References:
    Struppek, Hintersdorf, Correia, Adler and Kersting, "Plug & Play Attacks: Towards Robust and
    Flexible Model Inversion Attacks", ICML 2022 (Acc@1/Acc@5 of an evaluation model).
    Madry et al., ICLR 2018 (PGD robust accuracy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import rankdata
from torch import nn

from trainleak.errors import ConfigError, ShapeError
from trainleak.linalg import project_l1_ball
from trainleak.metrics.hsic import hsic, hsic_labels
from trainleak.metrics.intervals import class_bootstrap_interval
from trainleak.models.adversarial import pgd
from trainleak.models.embedding import embed


@dataclass(frozen=True)
class AttackAccuracy:
    """An evaluator's verdict on reconstructions labelled with their target classes.

    Attributes:
        acc1, acc5: share whose target class is the evaluator's top-1 / among its top-5.
        acc1_interval, acc5_interval: 95 % cluster-bootstrap intervals that resample target
            classes, not images: an attack's images of one class are near-copies, so they are
            one piece of evidence (``metrics.intervals.class_bootstrap_interval``).
        per_class: Acc@1 of each target class (NaN for a class without images).
        n: number of images scored.
        hits: the Acc@1 outcome of each image (1.0 or 0.0), for ratio intervals.
    """

    acc1: float
    acc5: float
    acc1_interval: tuple[float, float]
    acc5_interval: tuple[float, float]
    per_class: tuple[float, ...]
    n: int
    hits: tuple[float, ...] = ()


def _logits(model: nn.Module, x: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([model(x[i : i + chunk]) for i in range(0, len(x), chunk)])


def attack_accuracy(
    evaluator: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    *,
    seed: int = 0,
) -> AttackAccuracy:
    """Acc@1 and Acc@5 of ``evaluator`` on ``images`` meant to show ``labels``.

    Raises:
        ShapeError: images and labels of different lengths, or no image.
    """
    if len(images) != len(labels) or len(images) == 0:
        raise ShapeError(f"{len(images)} images for {len(labels)} labels (need >= 1 of each)")
    evaluator.eval()
    logits = _logits(evaluator, images)
    k = min(5, int(logits.shape[1]))
    top = logits.topk(k, dim=1).indices
    hit1 = (top[:, 0] == labels).double().cpu().numpy()
    hit5 = (top == labels[:, None]).any(1).double().cpu().numpy()
    groups = labels.cpu().numpy()
    per = []
    for c in range(num_classes):
        sel = (labels == c).cpu().numpy()
        per.append(float(hit1[sel].mean()) if sel.any() else math.nan)
    return AttackAccuracy(
        float(hit1.mean()),
        float(hit5.mean()),
        class_bootstrap_interval(hit1, groups, seed=seed),
        class_bootstrap_interval(hit5, groups, seed=seed),
        tuple(per),
        len(images),
        tuple(float(h) for h in hit1),
    )


def ratio_interval(
    num: Sequence[float],
    den: Sequence[float],
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``mean(num) / mean(den)`` and its percentile-bootstrap interval (the two samples are
    resampled independently); a zero denominator mean gives ``inf``."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ShapeError("a ratio interval needs two non-empty samples")
    rng = np.random.default_rng(seed)
    ma = a[rng.integers(0, a.size, (n_boot, a.size))].mean(1)
    mb = b[rng.integers(0, b.size, (n_boot, b.size))].mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0), np.inf)
        point = a.mean() / b.mean() if b.mean() > 0 else math.inf
    # no interpolation: a resample with a zero denominator is +inf, not NaN
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(point), float(lo), float(hi)


@dataclass(frozen=True)
class RobustnessProfile:
    """Robust accuracy of a classifier under l-infinity PGD at a grid of radii.

    Attributes:
        eps: the radii.
        accuracy: robust accuracy at each radius (the first radius 0 is clean accuracy).
        median_min_eps: the median over inputs of the smallest grid radius that flips the
            prediction (``inf`` when more than half are never flipped on the grid).
    """

    eps: tuple[float, ...]
    accuracy: tuple[float, ...]
    median_min_eps: float


def robustness_profile(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    eps_grid: Sequence[float],
    *,
    box: tuple[float, float],
    steps: int = 10,
    seed: int = 0,
) -> RobustnessProfile:
    """PGD robust accuracy at every radius of ``eps_grid`` (step ``2.5 eps / steps``)."""
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    grid = sorted(float(e) for e in eps_grid)
    first_flip = torch.full((len(x),), math.inf, dtype=torch.float64)
    accs = []
    for e in grid:
        adv = pgd(
            model,
            x,
            y,
            eps=e,
            step=2.5 * e / max(steps, 1),
            steps=steps,
            box=box,
            random_start=e > 0,
            generator=gen,
        )
        wrong = _logits(model, adv).argmax(1) != y
        first_flip[wrong & torch.isinf(first_flip)] = e
        accs.append(float((~wrong).double().mean()))
    return RobustnessProfile(tuple(grid), tuple(accs), float(first_flip.median()))


def feature_hsic(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, num_classes: int
) -> tuple[float, float]:
    """``(HSIC(X, Z), HSIC(Y, Z))`` on the penultimate features ``Z`` (median bandwidths for X
    and Z, bandwidth 1 for one-hot Y)."""
    model.eval()
    with torch.no_grad():
        z = embed(model, x).double()
        xd = x.flatten(1).double()
        return float(hsic(xd, z)), float(hsic_labels(y, z, num_classes))


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties); NaN below three points or for a
    constant sequence."""
    if len(a) != len(b):
        raise ShapeError(f"spearman pairs values: {len(a)} and {len(b)}")
    if len(a) < 3:
        return math.nan
    ra, rb = rankdata(np.asarray(a)), rankdata(np.asarray(b))
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def decoder_projection(
    decoder: nn.Module,
    x: torch.Tensor,
    latent_dim: int,
    *,
    steps: int = 500,
    lr: float = 0.05,
    feature_depth: int = 0,
    feature_radius: float = 0.0,
    feature_steps: int = 500,
    feature_lr: float = 0.01,
) -> torch.Tensor:
    """The decoder's closest images to ``x`` in mean squared error (Adam on the latents from
    zero). An evaluator-side reference, never an attack: scoring the projections of held-out
    private images says how much of an identity the prior can draw at all, a ceiling for any
    attack that searches its latents.

    With ``feature_depth >= 1`` the projection goes on in the decoder's intermediate features
    at that depth, inside the l1 ball of relative radius ``feature_radius`` around where the
    latent projection ended (the space the attacks' ``feature_steps`` phase searches), so it
    bounds that search instead.

    Raises:
        ShapeError: ``x`` is empty or not of the decoder's output shape.
        ConfigError: a feature depth the decoder does not expose.
    """
    if not len(x):
        raise ShapeError("decoder_projection needs at least one image")
    was = [p.requires_grad for p in decoder.parameters()]
    for p in decoder.parameters():
        p.requires_grad_(False)
    z = torch.zeros(len(x), latent_dim, requires_grad=True)
    try:
        z = _fit_code(decoder, z, x, steps, lr, lambda v: None)
        if not feature_depth:
            with torch.no_grad():
                return decoder(z)
        head = getattr(decoder, "features", None)
        tail = getattr(decoder, "from_features", None)
        if not callable(head) or not callable(tail):
            raise ConfigError(f"{type(decoder).__name__} exposes no intermediate features")
        with torch.no_grad():
            h0 = head(z, feature_depth)
        radius = feature_radius * h0.flatten(1).abs().sum(1)

        def ball(v: torch.Tensor) -> None:
            v.copy_(h0 + project_l1_ball(v - h0, radius))

        h = _fit_code(
            lambda v: tail(v, feature_depth), h0.clone(), x, feature_steps, feature_lr, ball
        )
        with torch.no_grad():
            out: torch.Tensor = tail(h, feature_depth)
            return out
    finally:
        for p, w in zip(decoder.parameters(), was, strict=True):
            p.requires_grad_(w)


def _fit_code(
    decode: Callable[[torch.Tensor], torch.Tensor],
    code: torch.Tensor,
    x: torch.Tensor,
    steps: int,
    lr: float,
    project: Callable[[torch.Tensor], None],
) -> torch.Tensor:
    code.requires_grad_(True)
    opt = torch.optim.Adam([code], lr=lr)
    for _ in range(steps):
        out = decode(code)
        if out.shape != x.shape:
            raise ShapeError(f"the decoder draws {tuple(out.shape)}, not {tuple(x.shape)}")
        loss = (out - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            project(code)
    return code.detach()
