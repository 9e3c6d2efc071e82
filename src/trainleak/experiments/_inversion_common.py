"""The run shared by the two model-inversion experiments: the task, prior and evaluators
(cached), target rows (clean and robust accuracy, HSIC) and attack rows under every
evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks.base import Reconstruction
from trainleak.attacks.inversion import AdaptiveInversion, GenerativeInversion, PriorOnly
from trainleak.experiments.model_inversion_claims import (
    AttackRow,
    ClassHitsRow,
    InversionConfig,
    TargetRow,
)
from trainleak.metrics.face_identity import DlibEmbedder, identity_score
from trainleak.metrics.inversion import AttackAccuracy, feature_hsic, robustness_profile
from trainleak.releases.classifier import ClassifierRelease, GenerativePrior
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.inversion import (
    BOX,
    InversionTask,
    adversary_knowledge,
    default_cache_dir,
    load_task,
)
from trainleak.scenarios.inversion_targets import Target, score, task_prior, train_evaluators
from trainleak.systems.classifier import PriorSettings

_HSIC_N = 300


@dataclass
class Setup:
    """What every target of a run shares."""

    task: InversionTask
    prior: GenerativePrior
    evaluators: dict[str, ClassifierRelease]
    knowledge: Knowledge
    cache: Path | None
    dlib: DlibEmbedder | None
    private_embeddings: torch.Tensor | None


def setup(cfg: InversionConfig) -> Setup:
    """Load the split, train (or load) the prior and the evaluators."""
    cache = (
        (Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()) if cfg.use_cache else None
    )
    with torch.device("cpu"):  # the loaders mix numpy and torch: load on the CPU, then move
        if cfg.dataset == "mnist":
            task = load_task(
                "mnist", n_private=cfg.n_private, n_public=cfg.n_public, n_test=cfg.n_test
            )
        else:
            task = load_task("orl", size=cfg.size)
    task = task.to(torch.get_default_device())
    settings = PriorSettings(
        latent_dim=cfg.latent_dim,
        steps=cfg.prior_steps,
        channels=cfg.prior_channels,
        beta=cfg.prior_beta,
        flip=cfg.prior_flip,
        kind=cfg.prior_kind,
        d_channels=cfg.prior_d_channels,
    )
    prior = task_prior(task, settings, cfg.seed, cache)
    evaluators = train_evaluators(task, cfg.evaluator_steps, cfg.seed, cache)
    dlib = DlibEmbedder(BOX) if cfg.dlib else None
    ref = dlib(task.private[0]) if dlib is not None else None
    return Setup(task, prior, evaluators, adversary_knowledge(task, prior), cache, dlib, ref)


def target_flip(cfg: InversionConfig) -> bool:
    """Whether the targets train on mirror images: ``cfg.target_flip``, by default on for
    faces (a mirrored face is the same person) and off for digits (a mirrored digit is not a
    digit of its class)."""
    return cfg.dataset == "orl" if cfg.target_flip is None else cfg.target_flip


def target_row(name: str, family: str, target: Target, s: Setup, cfg: InversionConfig) -> TargetRow:
    """Clean and PGD robust accuracy, the median flipping radius and HSIC of one target."""
    model = target.release.model()
    tx, ty = (t[: cfg.n_robust] for t in s.task.test)
    grid = sorted({0.0, *cfg.eps_grid, cfg.robust_eps})
    prof = robustness_profile(model, tx, ty, grid, box=BOX, seed=cfg.seed)
    hx, hy = feature_hsic(model, tx[:_HSIC_N], ty[:_HSIC_N], s.task.num_classes)
    return TargetRow(
        name,
        family,
        target.clean_accuracy,
        prof.accuracy[grid.index(cfg.robust_eps)],
        prof.median_min_eps,
        sum(prof.accuracy) / len(prof.accuracy),
        hx,
        hy,
    )


def attacks(cfg: InversionConfig, flip: bool) -> dict[str, object]:
    """The standard and adaptive attacks and the prior-only baseline at the adaptive attack's
    candidate budget (``candidates * restarts``), its selection score (margin; the house rule
    of equal selection, see ``docs/decisions.md``, fifth pass) and the same final count."""
    common = dict(candidates=cfg.candidates, keep=cfg.keep, final=cfg.final, flip=flip)
    adaptive = AdaptiveInversion(
        steps=cfg.adaptive_steps,
        restarts=cfg.restarts,
        model_augment=cfg.model_augment,
        latent_ball=cfg.latent_ball,
        feature_steps=cfg.feature_steps,
        feature_depth=cfg.feature_depth,
        feature_radius=cfg.feature_radius,
        **common,  # type: ignore[arg-type]
    )
    return {
        "standard": GenerativeInversion(steps=cfg.attack_steps, **common),  # type: ignore[arg-type]
        "adaptive": adaptive,
        "prior_only": PriorOnly(
            candidates=cfg.candidates * cfg.restarts,
            final=cfg.final,
            flip=flip,
            select=adaptive.select,
        ),
    }


def attack_rows(
    name: str,
    family: str,
    rec: Reconstruction,
    attack: str,
    s: Setup,
    seed: int,
    scores: dict[str, AttackAccuracy] | None = None,
) -> list[AttackRow]:
    """Score one reconstruction set under every evaluator (and dlib when on); ``scores``:
    the evaluators' verdicts when the caller has them already (``scenarios.score``)."""
    c = s.task.num_classes
    rows = []
    if scores is None:
        scores = score(rec.inputs, rec.labels, s.evaluators, c, seed)  # type: ignore[arg-type]
    for ev, a in scores.items():
        rows.append(
            AttackRow(
                name,
                family,
                attack,
                ev,
                a.acc1,
                a.acc1_interval[0],
                a.acc1_interval[1],
                a.acc5,
                a.n,
                1 / c,
            )
        )
    if s.dlib is not None and s.private_embeddings is not None and rec.labels is not None:
        ident = identity_score(
            s.dlib, rec.inputs, rec.labels, s.private_embeddings, s.task.private[1], c, seed=seed
        )
        lo, hi = ident.interval
        rows.append(
            AttackRow(
                name, family, attack, "dlib", ident.accuracy, lo, hi, ident.acc5, len(rec), 1 / c
            )
        )
    return rows


def count_class_hits(
    target: str,
    attack: str,
    evaluator: str,
    hits: tuple[float, ...],
    classes: tuple[int, ...],
    c: int,
) -> ClassHitsRow:
    """One evaluator's Acc@1 hits and images of each of the ``c`` target classes."""
    got, n = [0] * c, [0] * c
    for h, k in zip(hits, classes, strict=True):
        got[k] += int(h)
        n[k] += 1
    return ClassHitsRow(target, attack, evaluator, tuple(got), tuple(n))


def class_hits_row(r: ClassHitsRow) -> dict[str, Any]:
    """One row of the ``class_hits`` table: the Acc@1 hits and the images of each target class
    (space-separated counts, class 0 first), so that replicates can be pooled with a
    class-level bootstrap (``benchmarks/model_inversion.py``)."""
    return {
        "target": r.target,
        "attack": r.attack,
        "evaluator": r.evaluator,
        "hits": " ".join(map(str, r.hits)),
        "images": " ".join(map(str, r.images)),
    }
