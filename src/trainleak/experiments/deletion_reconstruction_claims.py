"""Rows and claims of ``deletion-reconstruction`` (seed 16): pure functions of the measurements.

Each claim is ``claim_fn(rows, config) -> Claim``; the unit tests feed them rows where they
must hold and rows where they must fail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import Field

from trainleak.experiments.base import Claim, ClaimFn, ExperimentConfig, claim, not_tested
from trainleak.experiments.risk import (
    BoundFinding,
    Release,
    RiskCard,
    riskiest_card,
    scored_finding,
    share_count,
)


class DeletionConfig(ExperimentConfig):
    """Config of ``deletion-reconstruction`` (numpy; well under a minute)."""

    n_honest: int = Field(10_000, ge=10)
    epsilons: list[float] = [0.5, 1.0, 2.0]
    deletions: list[int] = [0, 1, 3, 5, 11, 21, 51]
    trials: int = Field(300, ge=10)
    lr_n: int = Field(200, ge=20)
    lr_dim: int = Field(30, ge=2)
    lr_eps: float = Field(1.0, gt=0)


@dataclass(frozen=True)
class RecoveryRow:
    """Majority-vote recovery of the honest bits after ``k`` deletions at one ``eps``.

    ``bound_fresh`` is the exact expected fresh-coin rate, ``hoeffding`` its Hoeffding lower
    bound, ``single_release`` the one-release limit e^eps / (1 + e^eps); the other rates are
    measured (``coupled_adversary_first``: coupled coins with the adversary's records first).
    """

    eps: float
    k: int
    n_honest: int
    bound_fresh: float
    hoeffding: float
    single_release: float
    fresh: float
    coupled: float
    protected: float
    coupled_adversary_first: float


@dataclass(frozen=True)
class AdvantageRow:
    """Distinguishing advantage on neighbouring undeleted data sets (``trials`` runs a side)."""

    randomness: str
    eps: float
    deletions: int
    trials: int
    advantage: float


@dataclass(frozen=True)
class ExactSumRow:
    """Exact summation under deletions: what the consecutive sums reveal.

    ``deleted_max_error``: largest error of the deleted records read off consecutive sums.
    ``same_sum_gap``: largest difference between the transcripts of two honest data sets with
    the same sum (``honest_distance`` apart, RMS per entry); zero means the transcript depends
    on the honest records only through their sum.
    """

    deleted_max_error: float
    same_sum_gap: float
    honest_distance: float


@dataclass(frozen=True)
class LogRegRow:
    """DP logistic regression: the average of ``k + 1`` re-released models.

    ``auroc_gain_lower`` is a one-sided 95% paired-bootstrap lower bound (over the scored
    records) on the AUROC at ``k`` minus the AUROC at ``k = 0`` (0 at ``k = 0``).
    """

    randomness: str
    k: int
    param_error: float
    mia_auroc: float
    auroc_gain_lower: float


Row = RecoveryRow | AdvantageRow | ExactSumRow | LogRegRow
T = TypeVar("T")


def _of(rows: Sequence[Row], kind: type[T]) -> list[T]:
    return [r for r in rows if isinstance(r, kind)]


def claim_fresh_recovery(rows: Sequence[Row], cfg: DeletionConfig) -> Claim:
    """Fresh coins: above 99% of the honest bits at eps = 1 after 51 deletions."""
    text = "fresh randomness: above 99% of honest bits recovered at eps = 1 with 51 deletions"
    top = [r for r in _of(rows, RecoveryRow) if r.eps == 1.0 and r.k == 51]
    if not top:
        return not_tested(text, "the sweep has no point at eps = 1, k = 51")
    return claim(text, top[0].fresh > 0.99, fresh=top[0].fresh, bound=top[0].bound_fresh)


def _se4(p: float, n: int) -> float:
    """Four binomial standard errors of a rate ``p`` over ``n`` bits."""
    return 4 * math.sqrt(p * (1 - p) / n)


def claim_coupled_protected_stay(rows: Sequence[Row], cfg: DeletionConfig) -> Claim:
    """Coupled and protected coins stay at the single-release rate for every ``k``."""
    text = (
        "coupled and protected mechanisms stay at the single-release rate e^eps/(1+e^eps) "
        "(within 4 SE) for every k"
    )
    rec = _of(rows, RecoveryRow)
    if not any(r.k > 0 for r in rec):
        return not_tested(text, "the sweep has no point with deletions")
    gaps = [
        (abs(getattr(r, m) - r.single_release), r) for r in rec for m in ("coupled", "protected")
    ]
    return claim(
        text,
        all(g <= _se4(r.single_release, r.n_honest) + 1e-9 for g, r in gaps),
        worst=max(g for g, _ in gaps),
        tolerance=max(_se4(r.single_release, r.n_honest) + 1e-9 for r in rec),
    )


def claim_fresh_matches_theory(rows: Sequence[Row], cfg: DeletionConfig) -> Claim:
    """The measured fresh-coin rate matches the exact majority-vote rate and beats Hoeffding."""
    text = (
        "the measured fresh-coin rate matches the theoretical majority-vote rate (within 4 SE) "
        "and exceeds the Hoeffding bound"
    )
    rec = _of(rows, RecoveryRow)
    if not rec:
        return not_tested(text, "no recovery rows")
    fit = [abs(r.fresh - r.bound_fresh) <= _se4(r.bound_fresh, r.n_honest) + 2e-3 for r in rec]
    return claim(
        text,
        all(fit) and all(r.fresh >= r.hoeffding - 0.01 for r in rec),
        mismatches=int(len(fit) - sum(fit)),
    )


def claim_positional_coupling_fragile(rows: Sequence[Row], cfg: DeletionConfig) -> Claim:
    """Coupled coins leak like fresh ones once deletions shift the data-set order."""
    text = (
        "[inferred] positional coupling is fragile: when deletions shift data-set order, "
        "coupled coins leak like fresh ones"
    )
    rec = [r for r in _of(rows, RecoveryRow) if r.k >= 5]
    if not rec:
        return not_tested(text, "the sweep has no point with k >= 5 deletions")
    return claim(
        text,
        all(r.coupled_adversary_first > r.single_release + 0.05 for r in rec),
        rates=[(r.eps, r.k, round(r.coupled_adversary_first, 4)) for r in rec],
    )


def claim_advantage(rows: Sequence[Row], cfg: DeletionConfig) -> Claim:
    """Protected coins keep the advantage at tanh(eps/2); fresh coins exceed it.

    ``margin`` is three standard deviations of the estimated advantage (a difference of two
    proportions over ``trials`` runs each, variance at most ``0.5 / trials``).
    """
    text = (
        "the protected mechanism keeps the distinguishing advantage on neighbouring undeleted "
        "data at the one-release limit tanh(eps/2); fresh coins do not"
    )
    adv = {r.randomness: r for r in _of(rows, AdvantageRow)}
    fresh, prot = adv["fresh"], adv["protected"]
    if fresh.deletions == 0:  # without deletions the two mechanisms are one release
        return not_tested(text, "measured without deletions (the sweep's largest k is 0)")
    limit = math.tanh(prot.eps / 2)
    margin = 3 * math.sqrt(0.5 / prot.trials)
    return claim(
        text,
        prot.advantage <= limit + margin and fresh.advantage > limit + margin,
        fresh=fresh.advantage,
        protected=prot.advantage,
        limit=limit,
        margin=margin,
    )


def claim_exact_sum(rows: Sequence[Row], cfg: DeletionConfig) -> Claim:
    """Exact sums: differences reveal the deleted points; the honest ones only via their sum."""
    text = (
        "exact summation: differences reveal exactly the deleted points, and two different "
        "honest data sets with the same sum give the same transcript (the honest records are "
        "revealed no more than through their mean)"
    )
    m = _of(rows, ExactSumRow)[0]
    if m.honest_distance <= 0:
        return not_tested(text, "the two honest data sets are identical")
    return claim(
        text,
        m.deleted_max_error < 1e-9 and m.same_sum_gap < 1e-9,
        deleted_max_error=m.deleted_max_error,
        same_sum_gap=m.same_sum_gap,
        honest_distance=m.honest_distance,
    )


def claim_logreg_averaging(rows: Sequence[Row], cfg: DeletionConfig) -> Claim:
    """Fresh output noise averages out over re-releases; coupled noise does not."""
    lr = {(r.randomness, r.k): r for r in _of(rows, LogRegRow)}
    top = max(k for _, k in lr)
    f0, fk, c0, ck = lr[("fresh", 0)], lr[("fresh", top)], lr[("coupled", 0)], lr[("coupled", top)]
    return claim(
        "DP logistic regression retrained with fresh noise: averaging re-releases removes the "
        "noise (parameter error halves); coupled noise does not average out (error stays above "
        "80%)",
        top > 0 and fk.param_error < 0.5 * f0.param_error and ck.param_error > 0.8 * c0.param_error,
        table=[(r.randomness, r.k, round(r.param_error, 3)) for r in lr.values()],
    )


def claim_logreg_membership(rows: Sequence[Row], cfg: DeletionConfig) -> Claim:
    """Averaging fresh re-releases raises membership AUROC (paired-bootstrap lower bound)."""
    text = (
        "DP logistic regression retrained with fresh noise: membership AUROC of the honest "
        "records rises with averaging (one-sided 95% paired-bootstrap lower bound on the gain "
        "above 0)"
    )
    fresh = sorted((r for r in _of(rows, LogRegRow) if r.randomness == "fresh"), key=lambda r: r.k)
    if len(fresh) < 2 or fresh[-1].k == 0:
        return not_tested(text, "no averaged re-release to compare with the first release")
    return claim(
        text,
        fresh[-1].auroc_gain_lower > 0,
        auroc=[(r.k, round(r.mia_auroc, 4)) for r in fresh],
        gain=fresh[-1].mia_auroc - fresh[0].mia_auroc,
        gain_lower_95=fresh[-1].auroc_gain_lower,
    )


CLAIMS: tuple[ClaimFn, ...] = (
    claim_fresh_recovery,
    claim_coupled_protected_stay,
    claim_fresh_matches_theory,
    claim_positional_coupling_fragile,
    claim_advantage,
    claim_exact_sum,
    claim_logreg_averaging,
    claim_logreg_membership,
)


MECHANISMS = {
    "fresh": "fresh coins per retraining",
    "coupled": "coupled coins",
    "coupled_adversary_first": "coupled coins, the adversary's records first",
    "protected": "per-record coins kept (protected)",
}
BIT_RULE = "the majority vote over the k + 1 releases gives the honest bit"


def _single_release(r: RecoveryRow, mechanism: str) -> list[BoundFinding]:
    """The one-release limit: it holds for every attack on one release, hence at every k for
    the protected mechanism (its k + 1 releases are one), and for any mechanism at k = 0."""
    if mechanism != "protected" and r.k > 0:
        return []
    return [
        BoundFinding(
            "single-release limit of randomized response",
            r.single_release,
            "success probability",
            "upper",
            f"no attack guesses an honest bit right with probability above "
            f"e^eps / (1 + e^eps) = {r.single_release:.3g}",
            f"eps-DP randomized response at eps = {r.eps:g}, one release's coins",
        )
    ]


def risk_of(rows: Sequence[Row], cfg: DeletionConfig) -> RiskCard:
    """The card of the (mechanism, eps, k) whose deletions let the majority vote recover the
    most honest bits beyond a guess. The baseline is chance: a guess is right for half the
    bits, an exact expectation (no sampled run), counted by the same rule."""
    releases: dict[str, Release] = {}
    for r in _of(rows, RecoveryRow):
        for mechanism, words in MECHANISMS.items():
            found = scored_finding(
                "majority vote",
                share_count(getattr(r, mechanism), r.n_honest),
                r.n_honest,
                rule=BIT_RULE,
                baseline=r.n_honest // 2,
                detail="baseline: chance, a guess is right for half the bits (exact)",
            )
            name = f"randomized response at eps = {r.eps:g} after {r.k} deletions, {words}"
            releases[name] = ([found], _single_release(r, mechanism))
    return riskiest_card(releases)
