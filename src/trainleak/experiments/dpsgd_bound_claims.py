"""Rows and claims of ``dpsgd-distortion-bound`` (seed 2), as pure functions of the rows.

One :class:`EpsilonRow` per target epsilon: the bounds (computed before training) and every
attack's per-target error. Each claim is a function ``(rows, config) -> Claim`` listed in
:data:`CLAIMS`; the display table is built from the rows by :func:`display_table`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainleak.experiments.base import Claim, ClaimFn, claim, not_tested

MIN_TARGETS = 5
"""The bound is on the *expected* error: only means over this many targets enter a claim."""


@dataclass(frozen=True)
class EpsilonRow:
    """Bounds and attacks at one epsilon (errors are mean squared error per pixel).

    The per-target tuples hold one value per attacked target, in target order; ``map`` covers
    the first ``map_targets`` targets only. Feature-space fields are empty (or ``None``) when
    the run has no feature map.
    """

    epsilon: float
    sigma: float
    epsilon_rdp: float
    leakage_capacity: float
    leakage_chi2: float
    leakage_kl_null: float
    bound: float
    bound_slb_part: float
    bound_dv_part: float
    bound_finite_pool_part: float
    bound_sample_conf: float
    bound_frac_prior_var: float
    psnr_ceiling: float
    prior_variance: float
    guo_unbiased: float
    hayes_mse: float
    posterior_mean: tuple[float, ...]
    posterior_max: tuple[float, ...]
    population_mean: tuple[float, ...]
    map: tuple[float, ...] = ()
    feat_bound: float | None = None
    feat_prior_variance: float | None = None
    feat_posterior_mean: tuple[float, ...] = ()
    feat_population_mean: tuple[float, ...] = ()

    def best_attack(self) -> float:
        """The smallest mean error among the posterior mean, MAP (>= 5 targets), prior variance."""
        use_map = len(self.map) >= MIN_TARGETS
        return min(
            float(np.mean(self.posterior_mean)),
            float(np.mean(self.map)) if use_map else np.inf,
            self.prior_variance,
        )

    def ratio_best_attack_to_bound(self) -> float:
        """Best attack over the bound (``inf`` for a zero bound)."""
        return self.best_attack() / self.bound if self.bound > 0 else np.inf


def _se(values: Sequence[float]) -> float:
    return float(np.std(values) / max(1, len(values) - 1) ** 0.5)


def display_table(rows: Sequence[EpsilonRow]) -> list[dict[str, Any]]:
    """One display row per epsilon: bounds, mean errors (and standard errors), ratios."""
    table = []
    for row in rows:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(row):
            value = getattr(row, f.name)
            if isinstance(value, tuple):
                if value:
                    out[f.name] = float(np.mean(value))
                    if f.name in ("posterior_mean", "map"):
                        out[f.name + "_se"] = _se(value)
            elif value is not None:
                out[f.name] = value
        out["map_targets"] = len(row.map)
        out["best_attack"] = row.best_attack()
        out["ratio_best_attack_to_bound"] = row.ratio_best_attack_to_bound()
        table.append(out)
    return table


def claim_bound_below_attacks(rows: Sequence[EpsilonRow], cfg: Any) -> Claim:
    """The bound is below the best attack's mean error at every epsilon."""
    margins = [r.best_attack() - r.bound for r in rows]
    return claim(
        "The bound stays below every attack's mean error (over >= 5 targets) at every epsilon",
        all(m >= 0 for m in margins),
        min_margin=min(margins),
    )


def claim_feature_bound_below_attack(rows: Sequence[EpsilonRow], cfg: Any) -> Claim:
    """The feature-space bound is below the feature-space posterior mean's mean error."""
    text = "The feature-space (LPIPS-formula) bound stays below the feature-space attack"
    feat = [
        float(np.mean(r.feat_posterior_mean)) - r.feat_bound
        for r in rows
        if r.feat_bound is not None
    ]
    if not feat:
        return not_tested(text, "the run has no feature map (features=False)")
    return claim(text, all(m >= 0 for m in feat), min_margin=min(feat))


def claim_large_at_small_epsilon(rows: Sequence[EpsilonRow], cfg: Any) -> Claim:
    """At the smallest epsilon the bound is at least half the prior variance."""
    small = rows[0]
    return claim(
        "At the smallest epsilon the bound is a large fraction (>= 0.5) of the prior variance",
        small.bound_frac_prior_var >= 0.5,
        epsilon=small.epsilon,
        fraction=small.bound_frac_prior_var,
    )


def claim_decreases_with_epsilon(rows: Sequence[EpsilonRow], cfg: Any) -> Claim:
    """The bound does not increase from one epsilon to the next."""
    bounds = [r.bound for r in rows]
    return claim(
        "The bound decreases as epsilon grows",
        all(a >= b for a, b in zip(bounds, bounds[1:])),
        bounds=bounds,
    )


def _mid(rows: Sequence[EpsilonRow]) -> list[EpsilonRow]:
    return [r for r in rows if 1.0 <= r.epsilon <= 8.0]


def claim_tightness(rows: Sequence[EpsilonRow], cfg: Any) -> Claim:
    """Best attack over bound at most 2 for epsilon in [1, 8]."""
    ratios = [r.ratio_best_attack_to_bound() for r in _mid(rows)]
    return claim(
        "Tightness target: best attack / bound <= 2 for epsilon in [1, 8]",
        bool(ratios) and max(ratios) <= 2.0,
        ratios=ratios,
    )


def claim_tighter_than_hayes(rows: Sequence[EpsilonRow], cfg: Any) -> Claim:
    """The bound is at least the Hayes et al. bound converted to MSE, at every epsilon."""
    tighter = [r.epsilon for r in rows if r.bound >= r.hayes_mse]
    return claim(
        "The bound is at least as tight as Hayes et al. (converted to MSE) at every epsilon",
        len(tighter) == len(rows),
        epsilons_where_tighter=tighter,
    )


CLAIMS: tuple[ClaimFn, ...] = (
    claim_bound_below_attacks,
    claim_feature_bound_below_attack,
    claim_large_at_small_epsilon,
    claim_decreases_with_epsilon,
    claim_tightness,
    claim_tighter_than_hayes,
)


def headline_metrics(rows: Sequence[EpsilonRow]) -> dict[str, float]:
    """The metrics shown first in the report."""
    ratios = [r.ratio_best_attack_to_bound() for r in _mid(rows)]
    return {
        "max_ratio_eps_1_8": max(ratios) if ratios else float("nan"),
        "min_validity_margin": min(r.best_attack() - r.bound for r in rows),
        "bound_at_eps1": rows[0].bound,
    }
