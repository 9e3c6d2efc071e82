"""Claims of ``jacobian-uniqueness`` on synthetic rows: each must hold and must fail."""

from __future__ import annotations

import dataclasses

import pytest

from trainleak.experiments.jacobian_uniqueness import JacobianConfig
from trainleak.experiments.jacobian_uniqueness_claims import (
    CriterionRow,
    LeakageRow,
    Row,
    claim_bound_holds,
    claim_collision_witness,
    claim_dlg_below_vs_above,
    claim_full_rank_below,
    claim_leakage_decreases,
    difference_lower,
)

CFG = JacobianConfig()


def _crit(b: int, rank: int, success: bool, gap: float | None = 1e-15) -> CriterionRow:
    d, p = 650, 64
    return CriterionRow(
        model="softmax", d=d, batch_size=b, input_dim=p, rank=rank, null_dim=b * p - rank,
        sufficient=b * p > d, non_unique=rank < b * p, threshold=d // p + 1,
        collision_gap=gap if rank < b * p else None,
        collision_distance=0.01 if rank < b * p else None,
        collision_in_box=True if rank < b * p else None, dlg_mse=0.0 if success else 0.1,
        dlg_success=success,
    )  # fmt: skip


def _leak(rel: float, eps: float, bound: float, estimate: float = 1.5) -> LeakageRow:
    return LeakageRow(
        relative_distortion=rel, delta=rel, eps_empirical=eps, bound=bound, batch_term=0.77,
        distortion_term=1.77 - bound, poly=4.0, vacuous=bound >= 1, c_a=0.02, c_a_estimate=0.8,
        bound_estimate=estimate, min_leakage=-0.66,
    )  # fmt: skip


def test_full_rank_below_both_sides() -> None:
    rows: list[Row] = [_crit(4, 256, True), _crit(8, 512, False), _crit(16, 585, False)]
    assert claim_full_rank_below(rows, CFG).holds
    deficient = claim_full_rank_below([*rows, _crit(10, 585, False)], CFG)
    assert not deficient.holds and deficient.evidence["exceptions"] == [("softmax", 10, 585, 640)]
    assert "not_tested" in claim_full_rank_below([_crit(16, 585, False)], CFG).evidence


def test_collision_witness_both_sides() -> None:
    rows: list[Row] = [_crit(4, 256, True), _crit(16, 585, False), _crit(32, 585, False)]
    assert claim_collision_witness(rows, CFG).holds
    loose = [*rows[:2], _crit(32, 585, False, gap=1e-3)]  # Gauss-Newton did not close the gap
    assert not claim_collision_witness(loose, CFG).holds
    none = [*rows[:2], _crit(32, 585, False, gap=None)]
    assert not claim_collision_witness(none, CFG).holds
    assert "not_tested" in claim_collision_witness(rows[:1], CFG).evidence


def test_difference_lower_bound_is_an_interval_not_the_point_difference() -> None:
    assert difference_lower(12, 12, 0, 6) > 0.4
    low = difference_lower(4, 12, 0, 6)
    assert low < 0 < 4 / 12  # the point difference is positive, the interval is not
    assert difference_lower(0, 6, 6, 6) < -0.5


def test_dlg_below_vs_above_both_sides() -> None:
    below = [_crit(b, 64 * b, True) for b in (1, 2, 4, 8, 10)] * 2
    above = [_crit(b, 585, False) for b in (12, 16, 24, 32)] * 2
    good = claim_dlg_below_vs_above([*below, *above], CFG)
    assert good.holds and good.evidence["difference_lower_95"] > 0
    few = [_crit(1, 64, True), _crit(2, 128, True), *[_crit(8, 512, False)] * 4]
    weak = claim_dlg_below_vs_above([*few, *above[:6]], CFG)
    assert not weak.holds and weak.evidence["success_below"] == "2/6"
    assert "not_tested" in claim_dlg_below_vs_above(below, CFG).evidence


def test_leakage_decreases_both_sides() -> None:
    falling = [_leak(0.0, 0.8, 1.7), _leak(1.0, 0.3, 1.6), _leak(3.0, 0.1, 1.2)]
    assert claim_leakage_decreases(falling, CFG).holds
    bump = [_leak(0.0, 0.8, 1.7), _leak(1.0, 0.3, 1.6), _leak(3.0, 0.4, 1.2)]
    assert not claim_leakage_decreases(bump, CFG).holds
    assert "not_tested" in claim_leakage_decreases(falling[:1], CFG).evidence


def test_bound_is_checked_only_where_it_is_below_one() -> None:
    rows: list[Row] = [_leak(0.0, 0.8, 1.7), _leak(300.0, -0.1, 0.23, estimate=-57.0)]
    ok = claim_bound_holds(rows, CFG)
    assert ok.holds and ok.evidence["vacuous_points"] == 1
    assert ok.evidence["estimate_bound_violated_at"] == [300.0]
    violated = [rows[0], _leak(300.0, 0.5, 0.23)]
    assert not claim_bound_holds(violated, CFG).holds
    vacuous = claim_bound_holds([_leak(0.0, 0.8, 1.7), _leak(3.0, 0.1, 1.2)], CFG)
    assert not vacuous.holds and "vacuous" in vacuous.evidence["not_tested"]
    # below the smallest possible leakage every attack violates the bound: the claim fails
    impossible = claim_bound_holds([_leak(1000.0, -0.07, -3.4)], CFG)
    assert not impossible.holds
    assert impossible.evidence["below_smallest_possible_leakage"] == [1000.0]


@pytest.mark.parametrize("field", ["bound", "eps_empirical"])
def test_bound_claim_reads_the_certified_bound_not_the_estimate(field: str) -> None:
    row = _leak(300.0, -0.1, 0.23, estimate=-57.0)
    assert claim_bound_holds([row], CFG).holds  # the estimate-based value is not the claim
    flipped = dataclasses.replace(row, **{field: 0.9 if field == "eps_empirical" else -0.2})
    assert not claim_bound_holds([flipped], CFG).holds


@pytest.mark.slow
def test_tiny_run_checks_the_certified_bound_where_it_is_informative() -> None:
    from trainleak.experiments import get_experiment

    exp = get_experiment("jacobian-uniqueness")
    cfg = exp.make_config(
        {"batch_sizes": [2, 24], "dlg_iterations": 5, "dlg_restarts": 1, "hidden": 4,
         "distortions": [0.0, 300.0]}
    )  # fmt: skip
    res = exp.run(cfg)
    bound = res.claims[-1]
    assert bound.text.startswith("The leakage upper bound with a certified c_a")
    assert bound.evidence["vacuous_points"] == 1 and len(bound.evidence["informative"]) == 1
    assert 0 < bound.evidence["c_a_certified"] < bound.evidence["c_a_estimate"]
    assert res.claims[1].holds  # collision witnesses at B = 24
