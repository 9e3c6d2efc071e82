"""Rows and claims of ``optimizer-fingerprints``: each claim a pure function of one data set's rows.

The experiment applies :data:`CLAIMS` to the rows of each data set in turn (the rows name their
data set, which prefixes the claim's text). Rows: one :class:`FingerprintRow` per (dataset,
optimizer, seed) and one :class:`~._kkt_common.ScoreRow` per (dataset, optimizer, seed, method).
Comparisons over seeds use one-sided 95% paired t bounds (:mod:`trainleak.metrics.intervals`),
so three seeds whose spread exceeds their mean never pass.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainleak.experiments._kkt_claims import paired
from trainleak.experiments._kkt_common import ScoreRow, exceeds
from trainleak.experiments.base import Claim, ClaimFn, claim, not_tested
from trainleak.metrics.intervals import (
    difference_lower_bound,
    mean_lower_bound,
    mean_upper_bound,
)


@dataclass(frozen=True)
class FingerprintRow:
    """Training, cost and implicit-bias profile of one (dataset, optimizer, seed)."""

    dataset: str
    optimizer: str
    seed: int
    own_target: str
    train_steps: int
    steps_to_margin: int | None
    seconds_to_margin: float | None
    final_loss: float
    min_margin: float
    attack_seconds: float
    linf_saturation: float
    layer0_frac_near_top_sigma: float
    residual_l2: float
    residual_spectral: float
    residual_linf: float


def _runs(rows: Sequence[object], opt: str) -> list[FingerprintRow]:
    return sorted(
        (r for r in rows if isinstance(r, FingerprintRow) and r.optimizer == opt),
        key=lambda r: r.seed,
    )


def _scores(rows: Sequence[object], opt: str) -> list[ScoreRow]:
    return [r for r in rows if isinstance(r, ScoreRow) and r.optimizer == opt]


def _dataset(rows: Sequence[object]) -> str:
    names = sorted({str(getattr(r, "dataset", "?")) for r in rows})
    return "/".join(names) if names else "?"


def _reconstructs(opt: str, label: str) -> ClaimFn:
    def fn(rows: Sequence[object], config: object) -> Claim:
        text = (
            f"{_dataset(rows)}: {label} checkpoints reconstruct (own target recovers more "
            "images at SSIM >= 0.4 than every equal-budget baseline: as many random images, "
            "public held-out images, or perturbations of the public mean)"
        )
        scores = _scores(rows, opt)
        att, base, names = paired(scores, "ssim_04", frozenset({"baseline"}))
        if not att:
            return not_tested(text, f"no {opt} runs")
        holds, test = exceeds(att, base, scores[0].n)
        return claim(text, holds, own=att, best_baseline=base, best_baseline_method=names, **test)

    fn.__name__ = f"claim_{opt}_reconstructs"
    return fn


claim_gd_reconstructs = _reconstructs("gd", "GD")
claim_muon_reconstructs = _reconstructs("muon", "Muon")


def _own_counts(rows: Sequence[object], opt: str) -> dict[int, float]:
    return {r.seed: float(r.ssim_04) for r in _scores(rows, opt) if r.role == "attack"}


def _steps(r: FingerprintRow) -> int:
    """Steps to the margin regime; a run that never got there counts as its budget + 1."""
    return r.train_steps + 1 if r.steps_to_margin is None else r.steps_to_margin


def claim_muon_cheaper(rows: Sequence[object], config: Any) -> Claim:
    """Muon: fewer steps to the margin regime than GD, and not worse at reconstruction."""
    text = (
        f"{_dataset(rows)}: Muon reconstructs at least as well as GD (upper 95% bound on GD's "
        "advantage at SSIM >= 0.4 within the non-inferiority margin) at lower training cost "
        "(fewer steps to the margin regime, 95% paired bound)"
    )
    gd, mu = {r.seed: r for r in _runs(rows, "gd")}, {r.seed: r for r in _runs(rows, "muon")}
    seeds = sorted(set(gd) & set(mu))
    gd_n, mu_n = _own_counts(rows, "gd"), _own_counts(rows, "muon")
    seeds = [s for s in seeds if s in gd_n and s in mu_n]
    if len(seeds) < 2:
        return not_tested(text, "needs GD and Muon runs on at least two common seeds")
    if any(mu[s].steps_to_margin is None for s in seeds):
        return claim(text, False, muon_steps=[mu[s].steps_to_margin for s in seeds])
    # GD runs that never reached the margin count at their budget + 1 (a lower bound)
    gd_steps = [float(_steps(gd[s])) for s in seeds]
    mu_steps = [float(_steps(mu[s])) for s in seeds]
    steps_lb = difference_lower_bound(gd_steps, mu_steps, paired=True)
    advantage = [gd_n[s] - mu_n[s] for s in seeds]
    adv_ub = mean_upper_bound(advantage)
    n = next(r.n for r in _scores(rows, "gd"))
    margin = float(getattr(config, "noninferiority_margin", 0.1)) * n
    return claim(
        text,
        steps_lb > 0 and adv_ub <= margin,
        gd_steps=gd_steps,
        muon_steps=mu_steps,
        steps_difference_lower_bound=steps_lb,
        gd_count=[gd_n[s] for s in seeds],
        muon_count=[mu_n[s] for s in seeds],
        gd_advantage_upper_bound=adv_ub,
        noninferiority_margin_images=margin,
    )


def claim_adam_resists(rows: Sequence[object], config: object) -> Claim:
    """Adam (eps 1e-16) reconstructs fewer images than GD; tested only where GD reconstructs."""
    text = (
        f"{_dataset(rows)}: Adam (eps=1e-16) resists: where GD checkpoints reconstruct, Adam's "
        "under either target (own, l2) recovers fewer images at SSIM >= 0.4 than GD's"
    )
    gd_claim = claim_gd_reconstructs(rows, config)
    if not gd_claim.holds:
        return not_tested(
            text,
            "GD does not reconstruct here, so 'Adam resists' cannot be told apart from "
            "'nothing reconstructs'",
            gd_reconstructs=dict(gd_claim.evidence),
        )
    ad = [r for r in _scores(rows, "adam-eps1e-16") if r.role in ("attack", "variant")]
    gd_n = _own_counts(rows, "gd")
    seeds = sorted(gd_n.keys() & {r.seed for r in ad})
    if not seeds:
        return not_tested(text, "no Adam (eps=1e-16) runs on GD's seeds")
    best_ad = [max(float(r.ssim_04) for r in ad if r.seed == s) for s in seeds]
    holds, test = exceeds([gd_n[s] for s in seeds], best_ad, ad[0].n)
    return claim(text, holds, gd=[gd_n[s] for s in seeds], adam_best_target=best_ad, **test)


CLAIMS: tuple[ClaimFn, ...] = (
    claim_gd_reconstructs,
    claim_muon_reconstructs,
    claim_muon_cheaper,
    claim_adam_resists,
)


@dataclass(frozen=True)
class SummaryRow:
    """Mean and two-sided 95% t interval over seeds of one method on one (dataset, optimizer)."""

    dataset: str
    optimizer: str
    method: str
    seeds: int
    ssim_04_mean: float
    ssim_04_low: float | None
    ssim_04_high: float | None
    specific_mean: float
    specific_low: float | None
    specific_high: float | None
    median_ssim_mean: float
    steps_to_margin_mean: float | None
    residual_l2_mean: float
    residual_spectral_mean: float
    residual_linf_mean: float


def _interval(values: list[float]) -> tuple[float | None, float | None]:
    if len(values) < 2:
        return None, None
    lo, hi = mean_lower_bound(values, 0.975), mean_upper_bound(values, 0.975)
    # + 0.0 turns -0.0 into 0.0
    return (lo + 0.0 if math.isfinite(lo) else None), (hi + 0.0 if math.isfinite(hi) else None)


def summary_rows(runs: Sequence[FingerprintRow], scores: Sequence[ScoreRow]) -> list[SummaryRow]:
    """One summary row per (dataset, optimizer, method), in the order first seen."""
    out = []
    for key in dict.fromkeys((s.dataset, s.optimizer, s.method) for s in scores):
        ds, opt, method = key
        ss = [s for s in scores if (s.dataset, s.optimizer, s.method) == key]
        rs = [r for r in runs if r.dataset == ds and r.optimizer == opt]
        c04, spec = [float(s.ssim_04) for s in ss], [float(s.specific) for s in ss]
        hits = [r.steps_to_margin for r in rs]
        out.append(
            SummaryRow(
                dataset=ds,
                optimizer=opt,
                method=method,
                seeds=len(ss),
                ssim_04_mean=statistics.fmean(c04),
                ssim_04_low=_interval(c04)[0],
                ssim_04_high=_interval(c04)[1],
                specific_mean=statistics.fmean(spec),
                specific_low=_interval(spec)[0],
                specific_high=_interval(spec)[1],
                median_ssim_mean=statistics.fmean(s.median_ssim for s in ss),
                steps_to_margin_mean=(
                    statistics.fmean(h for h in hits if h is not None)
                    if rs and all(h is not None for h in hits)
                    else None
                ),
                residual_l2_mean=statistics.fmean(r.residual_l2 for r in rs) if rs else math.nan,
                residual_spectral_mean=(
                    statistics.fmean(r.residual_spectral for r in rs) if rs else math.nan
                ),
                residual_linf_mean=statistics.fmean(r.residual_linf for r in rs)
                if rs
                else math.nan,
            )
        )
    return out
