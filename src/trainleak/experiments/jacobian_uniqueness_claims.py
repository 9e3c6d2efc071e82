"""Rows and claims of ``jacobian-uniqueness`` (seed 17): pure functions of the measurements.

Each claim is ``claim_fn(rows, config) -> Claim``; the unit tests feed them rows where they
must hold and rows where they must fail. Zhang & Chen, arXiv 2407.16735 (2024).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field

from trainleak.bounds.jacobian import UniquenessReport
from trainleak.experiments.base import Claim, ClaimFn, ExperimentConfig, claim, not_tested
from trainleak.experiments.risk import (
    BoundFinding,
    Release,
    RiskCard,
    riskiest_card,
    scored_finding,
)
from trainleak.metrics.intervals import wilson_interval


class JacobianConfig(ExperimentConfig):
    """Config of ``jacobian-uniqueness``."""

    batch_sizes: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 10, 12, 16, 24, 32])
    hidden: int = Field(16, ge=1)
    dlg_iterations: int = Field(100, ge=1)
    dlg_restarts: int = Field(3, ge=1)
    distortions: list[float] = Field(
        default_factory=lambda: [0.0, 0.1, 0.3, 1.0, 3.0, 30.0, 100.0, 300.0]
    )
    leakage_batch: int = Field(4, ge=1)


@dataclass(frozen=True, kw_only=True)
class CriterionRow(UniquenessReport):
    """The rank criterion (the fields of :class:`UniquenessReport`), a collision witness and DLG
    at one (model, batch size).

    ``sufficient`` is ``B p > d``; ``non_unique`` is ``rank < B p``. The collision fields are
    None when no null direction exists (in the data box or at all).
    """

    model: str
    collision_gap: float | None
    collision_distance: float | None
    collision_in_box: bool | None
    dlg_mse: float
    dlg_success: bool


@dataclass(frozen=True)
class LeakageRow:
    """DLG's empirical leakage at one distortion, beside the upper bound's parts.

    ``bound`` uses ``c_a``, a certified lower bi-Lipschitz constant over the data box;
    ``bound_estimate`` uses ``c_a_estimate``, a minimum over sampled pairs (an estimate, which
    can overstate ``c_a``). ``min_leakage`` is the smallest leakage any output in the box can
    have (``1 - box diameter / D_max``); leakage is at most 1.
    """

    relative_distortion: float
    delta: float
    eps_empirical: float
    bound: float
    batch_term: float
    distortion_term: float
    poly: float
    vacuous: bool
    c_a: float
    c_a_estimate: float
    bound_estimate: float
    min_leakage: float


Row = CriterionRow | LeakageRow


def _criterion(rows: Sequence[Row]) -> list[CriterionRow]:
    return [r for r in rows if isinstance(r, CriterionRow)]


def _leakage(rows: Sequence[Row]) -> list[LeakageRow]:
    return [r for r in rows if isinstance(r, LeakageRow)]


def claim_full_rank_below(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """Below the counting threshold the Jacobian has full column rank."""
    text = "Below the threshold (B p <= d) the Jacobian has full column rank"
    below = [r for r in _criterion(rows) if not r.sufficient]
    if not below:
        return not_tested(text, "no batch size below the threshold")
    return claim(
        text,
        all(not r.non_unique for r in below),
        exceptions=[
            (r.model, r.batch_size, r.rank, r.batch_size * r.input_dim)
            for r in below
            if r.non_unique
        ],
    )


def claim_collision_witness(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """Above the threshold a distinct batch with the same update is exhibited."""
    text = (
        "Above the threshold a second batch with the same update exists (relative update gap "
        "< 1e-6 at a relative distance > 1e-3)"
    )
    wit = [r for r in _criterion(rows) if r.sufficient]
    if not wit:
        return not_tested(text, "no batch size above the threshold")
    return claim(
        text,
        all(
            r.collision_gap is not None
            and r.collision_distance is not None
            and r.collision_gap < 1e-6
            and r.collision_distance > 1e-3
            for r in wit
        ),
        witnesses=[(r.model, r.batch_size, r.collision_gap, r.collision_distance) for r in wit],
    )


def difference_lower(s1: int, n1: int, s2: int, n2: int) -> float:
    """One-sided 95% lower bound on ``s1/n1 - s2/n2`` (Newcombe's hybrid Wilson score)."""
    lo1, _ = wilson_interval(s1, n1, level=0.90)
    _, hi2 = wilson_interval(s2, n2, level=0.90)
    p1, p2 = s1 / n1, s2 / n2
    return p1 - p2 - math.sqrt((p1 - lo1) ** 2 + (hi2 - p2) ** 2)


def claim_dlg_below_vs_above(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """DLG succeeds more often below the threshold than above (interval, not point rates)."""
    text = (
        "DLG with known labels succeeds more often below the threshold than above it "
        "(one-sided 95% lower bound on the difference of success rates above 0)"
    )
    crit = _criterion(rows)
    below = [r.dlg_success for r in crit if not r.sufficient]
    above = [r.dlg_success for r in crit if r.sufficient]
    if not below or not above:
        return not_tested(text, "the sweep needs batch sizes on both sides of the threshold")
    lower = difference_lower(sum(below), len(below), sum(above), len(above))
    return claim(
        text,
        lower > 0,
        success_below=f"{sum(below)}/{len(below)}",
        success_above=f"{sum(above)}/{len(above)}",
        difference_lower_95=lower,
    )


def claim_leakage_decreases(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """DLG's leakage does not grow with the distortion (1e-3 slack)."""
    text = "Empirical leakage decreases as the distortion grows"
    leak = sorted(_leakage(rows), key=lambda r: r.delta)
    if len(leak) < 2:
        return not_tested(text, "a trend needs at least two distortions")
    eps = [r.eps_empirical for r in leak]
    return claim(text, all(a >= b - 1e-3 for a, b in zip(eps, eps[1:])), eps=eps)


def claim_bound_holds(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """The certified-constant bound is above DLG's leakage wherever it is below 1."""
    text = (
        "The leakage upper bound with a certified c_a holds (bound >= DLG's empirical leakage "
        "at every Delta where the bound is below the largest possible leakage 1)"
    )
    leak = _leakage(rows)
    live = [r for r in leak if r.bound < 1.0]
    evidence = {
        "informative": [(r.relative_distortion, r.bound, r.eps_empirical) for r in live],
        "vacuous_points": len(leak) - len(live),
        "c_a_certified": leak[0].c_a if leak else None,
        "c_a_estimate": leak[0].c_a_estimate if leak else None,
        "bound_with_estimate": [(r.relative_distortion, r.bound_estimate) for r in leak],
        "estimate_bound_violated_at": [
            r.relative_distortion for r in leak if r.bound_estimate < r.eps_empirical
        ],
        "below_smallest_possible_leakage": [
            r.relative_distortion for r in live if r.bound < r.min_leakage
        ],
    }
    if not live:
        return not_tested(text, "the bound is >= 1 (vacuous) at every distortion", **evidence)
    return claim(text, all(r.bound >= r.eps_empirical for r in live), **evidence)


CLAIMS: tuple[ClaimFn, ...] = (
    claim_full_rank_below,
    claim_collision_witness,
    claim_dlg_below_vs_above,
    claim_leakage_decreases,
    claim_bound_holds,
)


DLG_RULE = "DLG with known labels: matched MSE over the batch < 1e-3 (the whole batch counts)"


def _non_uniqueness(r: CriterionRow) -> list[BoundFinding]:
    """The Jacobian criterion as a bound, where the batch is not unique. It holds for every
    attack but says only that the batch cannot be identified, not how far a given attack must
    be from it, so it is not one that clears a release (``general=False``)."""
    if not r.non_unique:
        return []
    witness = (
        f"; a batch {r.collision_distance:.3g} away inside the data box gives the same update "
        f"(gap {r.collision_gap:.2g})"
        if r.collision_in_box and r.collision_distance is not None
        else ""
    )
    return [
        BoundFinding(
            "update-Jacobian non-uniqueness",
            float(r.null_dim),
            "dimensions of batches with the same update (B p - rank J)",
            "lower",
            f"a {r.null_dim}-dimensional set of batches reproduces the update{witness}",
            "FedSGD, one exact update; the batch is not identifiable, yet an attack may "
            "still come close to it",
            general=False,
        )
    ]


def risk_of(rows: Sequence[Row], cfg: JacobianConfig) -> RiskCard:
    """The card of the (model, batch size) update DLG recovered (largest batch first), with the
    non-uniqueness criterion where it holds. The distorted updates of the leakage sweep are
    scored by a leakage metric, not per record, and have no card."""
    releases: dict[str, Release] = {
        f"one FedSGD update of the {r.model} model on a batch of {r.batch_size} digits": (
            [
                scored_finding(
                    "DLG",
                    r.batch_size if r.dlg_success else 0,
                    r.batch_size,
                    rule=DLG_RULE,
                    error=r.dlg_mse,
                    detail=f"criterion threshold B = {r.threshold}",
                )
            ],
            _non_uniqueness(r),
        )
        for r in _criterion(rows)
    }
    return riskiest_card(releases)
