"""Rows and claims of ``dpsgd-distortion-bound`` (seed 2), as pure functions of the rows.

One :class:`BoundRow` per DP-SGD setting: the bounds (computed before training) and every
attack's per-target error. Rows of the ``sweep`` regime follow the seed's epsilon sweep; rows
of the ``concentrating`` regime (small pool, larger q*T, smaller sigma) are where the
posterior concentrates and the attack beats the prior, which is the only place a validity
check can fail: everywhere else the bound is below the prior variance by construction and the
attacks sit at the prior variance.

Two priors, two bounds: the *population* bound (the seed's headline) holds for a target drawn
from the population, estimated from the public sample with confidence 1 - ``confidence``; the
*pool* bound holds for a target drawn uniformly from the N public candidates, which the
prior-aware attacks know (Hayes et al.'s setting). Attacks that know the pool are compared
with the pool bound only; the population-setting attacks (posterior mean over the pool
without the target, the mean of the other candidates) see no more than the population.

Each claim is a function ``(rows, config) -> Claim`` listed in :data:`CLAIMS`; expected errors
are compared through one-sided 95% confidence limits over targets, never through means alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from trainleak.experiments.base import Claim, ClaimFn, claim, not_tested
from trainleak.experiments.risk import (
    MSE_UNIT,
    BoundFinding,
    Release,
    RiskCard,
    riskiest_card,
    scored_finding,
)
from trainleak.metrics.intervals import mean_upper_bound

LEVEL = 0.95
"""Confidence of every one-sided interval."""
MIN_TARGETS = 5
"""The bounds are on *expected* error: an attack with fewer targets enters no claim."""
POOL_ATTACKS = ("posterior_mean", "map", "pool_mean")
POPULATION_ATTACKS = ("population_posterior_mean", "public_mean")


@dataclass(frozen=True)
class BoundRow:
    """Bounds and attacks at one DP-SGD setting (pixel errors: mean squared error per pixel).

    Per-target tuples hold one value per attacked target; ``map`` covers the first targets
    only; feature-space errors are squared distances in the LPIPS-formula feature space.
    ``identified`` says whether the posterior's most likely candidate was the target.
    """

    regime: str
    epsilon: float
    sigma: float
    sampling_rate: float
    steps: int
    pool_size: int
    leakage: float
    leakage_capacity: float
    leakage_chi2: float
    leakage_kl_null: float
    population_bound: float
    population_psnr_ceiling: float
    pool_bound: float
    pool_bound_slb_part: float
    pool_bound_dv_part: float
    pool_bound_finite_pool_part: float
    prior_variance: float
    guo_unbiased: float
    hayes_mse: float
    hayes_success: float
    hayes_success_se: float
    leakage_success: float
    posterior_mean: tuple[float, ...]
    identified: tuple[bool, ...]
    pool_mean: tuple[float, ...]
    population_posterior_mean: tuple[float, ...]
    public_mean: tuple[float, ...]
    map: tuple[float, ...] = ()
    feat_pool_bound: float | None = None
    feat_prior_variance: float | None = None
    feat_posterior_mean: tuple[float, ...] = ()
    feat_pool_mean: tuple[float, ...] = ()


def upper(values: Sequence[float]) -> float:
    """One-sided 95% upper confidence limit on the expected error (``inf`` if too few)."""
    return mean_upper_bound(values, LEVEL) if len(values) >= MIN_TARGETS else np.inf


def binomial_lower(successes: int, trials: int) -> float:
    """One-sided 95% Clopper-Pearson lower limit of a success rate (exact, unlike Wilson's,
    which is anti-conservative for a few successes in a few trials)."""
    if successes == 0:
        return 0.0
    return float(stats.beta.ppf(1 - LEVEL, successes, trials - successes + 1))


def _best(row: BoundRow, attacks: Sequence[str]) -> tuple[str | None, float]:
    """The attack with the smallest mean error (enough targets), and its upper limit."""
    usable = [a for a in attacks if len(getattr(row, a)) >= MIN_TARGETS]
    if not usable:
        return None, np.inf
    name = min(usable, key=lambda a: float(np.mean(getattr(row, a))))
    return name, upper(getattr(row, name))


def _sweep(rows: Sequence[BoundRow]) -> list[BoundRow]:
    return sorted((r for r in rows if r.regime == "sweep"), key=lambda r: r.epsilon)


def _beats_baseline(attack: Sequence[float], baseline: Sequence[float]) -> bool:
    """The attack's error is below the constant baseline's on the same targets (one-sided 95%
    upper limit of the paired difference below 0): the posterior has concentrated."""
    diff = np.subtract(attack, baseline[: len(attack)])
    return len(diff) >= MIN_TARGETS and mean_upper_bound(diff, LEVEL) < 0


def _validity(
    rows: Sequence[BoundRow], text: str, bound: str, baseline: str, attacks: Sequence[str]
) -> Claim:
    """bound <= E[error] for every attack, refuted where an attack's upper limit is below it.

    Needs at least one row where an attack that reads the release beats the constant
    ``baseline`` (whose expected error is the prior variance) on the same targets: elsewhere a
    bound below the prior variance cannot be refuted.
    """
    checked, informative, violations = 0, [], []
    for r in rows:
        value = getattr(r, bound)
        if value is None:
            continue
        for a in (*attacks, baseline):
            errors = getattr(r, a)
            if len(errors) < MIN_TARGETS:
                continue
            checked += 1
            ucl = upper(errors)
            if a != baseline and _beats_baseline(errors, getattr(r, baseline)):
                ratio = ucl / float(np.mean(getattr(r, baseline)))
                informative.append((r.regime, r.sigma, a, round(ratio, 3)))
            if ucl < value:
                violations.append((r.regime, r.sigma, a, ucl, value))
    evidence = {"checks": checked, "violations": violations, "informative": informative}
    if checked == 0:
        return not_tested(text, "no such measurement in this run (e.g. features=False)")
    if not informative and not violations:
        return not_tested(
            text, "no attack beat the constant baseline: the check cannot bite", **evidence
        )
    return claim(text, not violations, **evidence)


def claim_pool_bound_valid(rows: Sequence[BoundRow], cfg: Any) -> Claim:
    """The pool-prior bound is below every pool-aware attack, checked where it can fail."""
    return _validity(
        rows,
        "Validity: the pool-prior bound stays below every prior-aware attack's expected error "
        "(one-sided 95% upper limit over targets), checked where the posterior concentrates "
        "and the attack beats the prior mean on the same targets (one-sided 95%)",
        "pool_bound",
        "pool_mean",
        ("posterior_mean", "map"),
    )


def claim_feature_bound_valid(rows: Sequence[BoundRow], cfg: Any) -> Claim:
    """The feature-space pool-prior bound is below the feature-space attacks."""
    return _validity(
        rows,
        "Validity in feature space: the LPIPS-formula pool-prior bound stays below the "
        "feature-space posterior mean's expected error (one-sided 95% upper limit), checked "
        "where the attack beats the prior mean's features on the same targets",
        "feat_pool_bound",
        "feat_pool_mean",
        ("feat_posterior_mean",),
    )


def claim_hayes_success_valid(rows: Sequence[BoundRow], cfg: Any) -> Claim:
    """Hayes et al.'s success bound is above the prior-aware attack's identification rate."""
    text = (
        "Validity in Hayes et al.'s units: the posterior's identification rate stays below "
        "their success bound (one-sided 95% exact binomial lower limit at most the bound plus 3 "
        "Monte Carlo standard errors), including where the attack beats chance"
    )
    informative, violations = [], []
    for r in rows:
        k, n = int(sum(r.identified)), len(r.identified)
        if n < MIN_TARGETS:
            continue
        lower = binomial_lower(k, n)
        if lower > 1.0 / r.pool_size:
            informative.append((r.regime, r.sigma, k, n))
        if lower > r.hayes_success + 3 * r.hayes_success_se:
            violations.append((r.regime, r.sigma, lower, r.hayes_success))
    evidence = {"informative": informative, "violations": violations}
    if not informative and not violations:
        return not_tested(text, "the attack never beat chance: cannot bite", **evidence)
    return claim(text, not violations, **evidence)


def claim_headline_large_at_small_epsilon(rows: Sequence[BoundRow], cfg: Any) -> Claim:
    """At the smallest epsilon the population bound is at least half the prior variance."""
    small = _sweep(rows)[0]
    return claim(
        "At the smallest epsilon the population-prior bound (headline, finite-sample confidence) "
        "is a large fraction (>= 0.5) of the prior variance",
        small.population_bound >= 0.5 * small.prior_variance,
        epsilon=small.epsilon,
        fraction=small.population_bound / small.prior_variance,
        pool_bound_fraction=small.pool_bound / small.prior_variance,
    )


def claim_headline_decreases(rows: Sequence[BoundRow], cfg: Any) -> Claim:
    """The population bound falls strictly from one epsilon to the next (never flat at 0)."""
    bounds = [r.population_bound for r in _sweep(rows)]
    return claim(
        "The population-prior bound decreases strictly as epsilon grows (it is not flat, and in "
        "particular not flat at zero, over the sweep)",
        len(bounds) >= 2 and all(a > b for a, b in zip(bounds, bounds[1:])),
        bounds=bounds,
    )


def _ratio(row: BoundRow, attacks: Sequence[str], bound: float) -> float:
    return _best(row, attacks)[1] / bound if bound > 0 else np.inf


def claim_tightness(rows: Sequence[BoundRow], cfg: Any) -> Claim:
    """Best population-setting attack within 2x of the population bound for epsilon in [1, 8]."""
    mid = [r for r in _sweep(rows) if 1.0 <= r.epsilon <= 8.0]
    ratios = [_ratio(r, POPULATION_ATTACKS, r.population_bound) for r in mid]
    return claim(
        "Tightness target: the best population-setting attack's expected error (one-sided 95% "
        "upper limit) is at most 2x the population-prior bound for epsilon in [1, 8]",
        bool(ratios) and max(ratios) <= 2.0,
        epsilons=[r.epsilon for r in mid],
        ratios=ratios,
        pool_ratios=[_ratio(r, POOL_ATTACKS, r.pool_bound) for r in mid],
    )


def claim_tighter_than_hayes_mse(rows: Sequence[BoundRow], cfg: Any) -> Claim:
    """The pool bound is at least Hayes et al.'s bound converted to MSE (same pool prior)."""
    sweep = _sweep(rows)
    tighter = [r.epsilon for r in sweep if r.pool_bound >= r.hayes_mse]
    return claim(
        "Against Hayes et al. converted to MSE (both for the target uniform over the pool): the "
        "pool-prior bound is at least as large at every epsilon",
        bool(sweep) and len(tighter) == len(sweep),
        epsilons_where_tighter=tighter,
        pool_bound=[r.pool_bound for r in sweep],
        hayes_mse=[r.hayes_mse for r in sweep],
    )


def claim_tighter_than_hayes_success(rows: Sequence[BoundRow], cfg: Any) -> Claim:
    """In success probability, the leakage-based bound is at most Hayes et al.'s."""
    sweep = _sweep(rows)
    tighter = [r.epsilon for r in sweep if r.leakage_success <= r.hayes_success]
    return claim(
        "Against Hayes et al. in their own units (probability of identifying the target among "
        "the N candidates): the trainleak leakage, turned into a success bound by the binary-KL "
        "data-processing inequality, is at least as tight at every epsilon",
        bool(sweep) and len(tighter) == len(sweep),
        epsilons_where_tighter=tighter,
        leakage_success=[r.leakage_success for r in sweep],
        hayes_success=[r.hayes_success for r in sweep],
        chance=[1.0 / r.pool_size for r in sweep],
    )


CLAIMS: tuple[ClaimFn, ...] = (
    claim_pool_bound_valid,
    claim_feature_bound_valid,
    claim_hayes_success_valid,
    claim_headline_large_at_small_epsilon,
    claim_headline_decreases,
    claim_tightness,
    claim_tighter_than_hayes_mse,
    claim_tighter_than_hayes_success,
)


def display_table(rows: Sequence[BoundRow]) -> list[dict[str, Any]]:
    """One display row per setting: bounds, mean errors with upper limits, success rates."""
    table = []
    for row in rows:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(row):
            value = getattr(row, f.name)
            if f.name == "identified":
                out["identified"] = f"{sum(value)}/{len(value)}"
            elif isinstance(value, tuple):
                if value:
                    out[f.name] = float(np.mean(value))
                    out[f.name + "_ucl"] = upper(value)
            elif value is not None:
                out[f.name] = value
        out["map_targets"] = len(row.map)
        table.append(out)
    return table


def headline_metrics(rows: Sequence[BoundRow]) -> dict[str, float]:
    """The metrics shown first in the report (the population-prior bound is the headline)."""
    sweep = _sweep(rows)
    mid = [r for r in sweep if 1.0 <= r.epsilon <= 8.0]
    ratios = [_ratio(r, POPULATION_ATTACKS, r.population_bound) for r in mid]
    conc = [r for r in rows if r.regime == "concentrating"]
    margins = [
        upper(getattr(r, a)) - r.pool_bound
        for r in conc
        for a in POOL_ATTACKS
        if len(getattr(r, a)) >= MIN_TARGETS
    ]
    return {
        "population_bound_at_smallest_eps": sweep[0].population_bound if sweep else np.nan,
        "pool_bound_at_smallest_eps": sweep[0].pool_bound if sweep else np.nan,
        "max_ratio_eps_1_8": max(ratios) if ratios else np.nan,
        "min_validity_margin_concentrating": min(margins) if margins else np.nan,
    }


IDENTIFIED = "the posterior's most likely candidate is the target (identified among the pool)"


def _pool_bounds(r: BoundRow) -> list[BoundFinding]:
    """The bounds for a target drawn uniformly from the pool (the attack's own setting)."""
    prior = (
        f"the target is drawn uniformly from the {r.pool_size} public candidates and trained "
        f"by DP-SGD with sigma {r.sigma:.3g}, q {r.sampling_rate:g}, {r.steps} steps"
    )
    unit = f"{MSE_UNIT}, [0, 1] pixels"
    return [
        BoundFinding("rate-distortion bound, pool prior", r.pool_bound, unit, "lower",
                     f"every attack's expected error is at least {r.pool_bound:.3g} per pixel",
                     prior),
        BoundFinding("Hayes et al. 2023", r.hayes_success, "success probability", "upper",
                     f"no attack identifies the target with probability above "
                     f"{r.hayes_success:.3g}", f"{prior}; Monte Carlo standard error "
                     f"{r.hayes_success_se:.2g}"),
        BoundFinding("Guo et al. 2022", r.guo_unbiased, unit, "lower",
                     f"an unbiased estimator's expected error is at least {r.guo_unbiased:.3g}",
                     "unbiased estimators only", general=False),
    ]  # fmt: skip


def risk_of(rows: Sequence[BoundRow], cfg: Any) -> RiskCard:
    """The card of the DP-SGD setting whose release the posterior-mean attack (knowing the
    candidate pool) identified the target from most often beyond chance (a uniform guess
    among the pool: an exact expectation, no sampled run), with the pool-prior bounds."""
    releases: dict[str, Release] = {}
    for r in rows:
        attack = scored_finding(
            "posterior mean over the candidate pool",
            sum(r.identified),
            len(r.identified),
            rule=IDENTIFIED,
            baseline=round(len(r.identified) / r.pool_size),
            error=float(np.mean(r.posterior_mean)) if r.posterior_mean else None,
            detail=f"baseline: chance, a uniform guess among the {r.pool_size} candidates "
            "(exact expectation)",
        )
        name = (
            f"DP-SGD logistic regression at epsilon {r.epsilon:.3g} (sigma {r.sigma:.3g}, "
            f"{r.regime} regime), one release per attacked target"
        )
        releases[name] = ([attack] if r.identified else [], _pool_bounds(r))
    return riskiest_card(releases)
