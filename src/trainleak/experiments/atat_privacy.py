"""Seed 8 (AT-AT): reducing information dependency does not cause training-data privacy;
adversarially non-robust features do. Standard, AT and AT-AT models (weights and radii swept),
a maximally memorising model and a drop-layer model seeing about 3 % of the pixels are trained
on the private classes and inverted by the standard generative attack; each model's clean and
PGD robust accuracy and HSIC of its penultimate features are measured.

Torp, Smith and Breuer, "Reducing information dependency does not cause training data privacy.
Adversarially non-robust features do.", ICLR 2026 (code: BreuerLabs/Anti-Adversarial-Training);
the small-scale settings are the seed brief's (``../shared/docs/seed-briefs-1.md`` section 8).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import torch

from trainleak.experiments._inversion_common import (
    Setup,
    attack_rows,
    attacks,
    class_hits_row,
    count_class_hits,
    setup,
    target_flip,
    target_row,
)
from trainleak.experiments._inversion_figures import (
    bars_figure,
    class_grid,
    reliance_figure,
    scatter_figure,
)
from trainleak.experiments._inversion_risk import risk_of
from trainleak.experiments.atat_privacy_claims import ATAT_CLAIMS
from trainleak.experiments.base import Result, evaluate_claims, experiment, rows_table
from trainleak.experiments.model_inversion_claims import (
    AtatPrivacyConfig,
    AttackRow,
    RelianceRow,
    Row,
    TargetRow,
)
from trainleak.progress import Progress
from trainleak.scenarios.feature_reliance import TwoCueTask, measure_reliance
from trainleak.scenarios.inversion_targets import Recipe, recipe, score, train_target
from trainleak.systems.classifier import TrainSettings


def reliance_rows(
    cfg: AtatPrivacyConfig,
    models: list[tuple[str, str, Recipe]],
    s: Setup,
    progress: Progress | None = None,
) -> list[RelianceRow]:
    """The standard, AT and AT-AT models' defenses (same knobs and steps, no mirror images)
    retrained on the two-cue task with seeds ``cfg.seed .. cfg.seed + reliance_seeds - 1``;
    the cue patterns come from ``cfg.seed``. On the CPU whatever ``cfg.device`` is: the task is
    small, and its draws use CPU generators."""
    task = TwoCueTask(delta=cfg.reliance_delta)
    jobs = [
        (name, family, rec_, cfg.seed + j)
        for name, family, rec_ in models
        if family in ("standard", "at", "atat")
        for j in range(cfg.reliance_seeds)
    ]
    out = []
    for i, (name, family, rec_, seed) in enumerate(jobs):
        settings = TrainSettings(steps=rec_.settings.steps)
        with torch.device("cpu"):
            got = measure_reliance(task, rec_.defense, settings, seed, cfg.seed, s.cache)
        out.append(RelianceRow(name, family, seed, **asdict(got), reliance=got.reliance))
        if progress is not None:
            progress("two-cue models", i + 1, len(jobs))
    return out


def roster(cfg: AtatPrivacyConfig, s: Setup) -> list[tuple[str, str, Recipe]]:
    """(name, family, recipe) of every model: standard, AT, AT-AT over weights at the first
    radius and over radii at the first weight, memorising, drop-layer."""
    steps, flip = cfg.target_steps, target_flip(cfg)
    out = [
        ("standard", "standard", recipe("standard", s.task, steps, flip=flip)),
        ("at", "at", recipe("at", s.task, steps, flip=flip)),
    ]
    knobs = [(w, cfg.atat_eps[0]) for w in cfg.atat_weights]
    knobs += [(cfg.atat_weights[0], e) for e in cfg.atat_eps[1:]]
    for w, e in knobs:
        out.append(
            (
                f"atat-w{w:g}-e{e:g}",
                "atat",
                recipe("atat", s.task, steps, atat_eps=e, atat_weight=w, flip=flip),
            )
        )
    out += [
        ("memorise", "memorise", recipe("memorise", s.task, steps, flip=flip)),
        ("droplayer", "droplayer", recipe("droplayer", s.task, steps, flip=flip)),
    ]
    return out


@experiment(
    "atat-privacy",
    "AT-AT: non-robust features, not information dependency, explain inversion privacy (seed 8)",
    AtatPrivacyConfig,
)
def run(cfg: AtatPrivacyConfig, progress: Progress | None = None) -> Result:
    """Run on ``cfg.device`` (models and tensors are created there; releases stay on the CPU)."""
    with torch.device(cfg.device):
        return _run(cfg, progress)


def _run(cfg: AtatPrivacyConfig, progress: Progress | None = None) -> Result:
    """Every model of the roster, the standard attack (and the prior-only baseline on the
    drop-layer model) under both evaluators; then claims."""
    start = time.perf_counter()
    s = setup(cfg)
    atk = attacks(cfg, flip=cfg.dataset == "orl")
    rows: list[Row] = []
    images: dict[str, object] = {}
    models = roster(cfg, s)
    seed = cfg.seed if cfg.target_seed is None else cfg.target_seed
    c = s.task.num_classes
    class_hits: list[dict[str, Any]] = []
    for i, (name, family, rec_) in enumerate(models):
        target = train_target(s.task, rec_, seed, s.cache)
        rows.append(target_row(name, family, target, s, cfg))
        rec = atk["standard"](target.release, s.knowledge, seed=seed + 1)  # type: ignore[operator]
        scores = score(rec.inputs, rec.labels, s.evaluators, c, cfg.seed)  # type: ignore[arg-type]
        rows += attack_rows(name, family, rec, "standard", s, cfg.seed, scores)
        classes = tuple(int(k) for k in rec.labels)  # type: ignore[union-attr]
        for ev, a in scores.items():
            counted = count_class_hits(name, "standard", ev, a.hits, classes, c)
            class_hits.append(class_hits_row(counted))
        if name in ("standard", "droplayer") or i == 2:
            images[f"grid_{name}"] = class_grid(
                rec.inputs, rec.labels, *s.task.private, s.task.num_classes, min(cfg.final, 4)
            )
        if name == "droplayer":
            base = atk["prior_only"](target.release, s.knowledge, seed=seed + 1)  # type: ignore[operator]
            rows += attack_rows(name, family, base, "prior_only", s, cfg.seed)
        if progress is not None:
            progress("models", i + 1, len(models))
    rows += reliance_rows(cfg, models, s, progress)
    res = Result(experiment="atat-privacy", config=cfg.model_dump())
    res.claims = evaluate_claims(ATAT_CLAIMS, rows, cfg)
    res.risk = risk_of(rows, cfg)
    res.metrics["total_s"] = time.perf_counter() - start
    attack = [r for r in rows if isinstance(r, AttackRow)]
    targets = [r for r in rows if isinstance(r, TargetRow)]
    res.tables["models"] = rows_table(targets)
    res.tables["attacks"] = rows_table(attack)
    res.tables["class_hits"] = class_hits
    res.figures["bars_standard"] = bars_figure(attack, "standard")
    res.figures["robustness_vs_leakage"] = scatter_figure(targets, attack, "standard")
    reliance = [r for r in rows if isinstance(r, RelianceRow)]
    if reliance:
        res.tables["reliance"] = rows_table(reliance)
        res.figures["cue_reliance"] = reliance_figure(reliance)
    res.images.update(images)  # type: ignore[arg-type]
    res.notes = NOTES
    return res


NOTES = (
    "AT: untargeted PGD eps 0.05 (the seed's 0.1 on [-1, 1]), 10 steps, adversarial loss only. "
    "AT-AT: targeted PGD toward a random wrong class, eps and step on the [0, 1] scale (step = "
    "eps / 5, 5 steps, random start), loss CE(x, y) + weight * CE(x_adv, t). Memorising: the "
    "standard model trained 5x longer without weight decay. Drop layer: a fixed random 3 % of "
    "the pixels feed an MLP. Robust accuracy: PGD at robust_eps, 10 steps. HSIC: Gaussian "
    "kernels, median bandwidths for X and Z, bandwidth 1 for one-hot Y, on 300 test images. "
    "On faces every model trains on random mirror images too (target_flip). Two-cue task "
    "(scenarios.feature_reliance, after Ilyas et al. 2019): the standard, AT and AT-AT "
    "defenses retrained on synthetic 16 x 16 images carrying a visible class pattern (right "
    "90% of the time) and an imperceptible +-delta pattern (always right); reliance = share "
    "of conflict images (the two cues name different classes) classified by the "
    "imperceptible cue. class_hits: each model's standard-attack Acc@1 hits by target class "
    "under each evaluator, so that runs at other target seeds (target_seed; the prior and the "
    "evaluators keep seed) can be pooled by class (benchmarks/model_inversion.py)."
)
