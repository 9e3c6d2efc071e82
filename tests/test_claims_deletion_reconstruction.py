"""Claims of ``deletion-reconstruction`` on synthetic rows: each must hold and must fail."""

from __future__ import annotations

import dataclasses
import math

import pytest

from trainleak.experiments.deletion_reconstruction import DeletionConfig
from trainleak.experiments.deletion_reconstruction_claims import (
    AdvantageRow,
    ExactSumRow,
    LogRegRow,
    RecoveryRow,
    Row,
    claim_advantage,
    claim_coupled_protected_stay,
    claim_exact_sum,
    claim_fresh_matches_theory,
    claim_fresh_recovery,
    claim_logreg_averaging,
    claim_logreg_membership,
    claim_positional_coupling_fragile,
)

CFG = DeletionConfig()
SINGLE = math.e / (1 + math.e)  # eps = 1


def _rec(k: int, fresh: float, **kw: float) -> RecoveryRow:
    base = dict(
        eps=1.0,
        k=k,
        n_honest=10_000,
        bound_fresh=fresh,
        hoeffding=fresh - 0.1,
        single_release=SINGLE,
        fresh=fresh,
        coupled=SINGLE,
        protected=SINGLE,
        coupled_adversary_first=fresh,
    )
    return RecoveryRow(**(base | kw))  # type: ignore[arg-type]


GOOD: list[Row] = [_rec(0, SINGLE), _rec(5, 0.9), _rec(51, 0.9995)]


def _swap(rows: list[Row], i: int, **changes: object) -> list[Row]:
    out = list(rows)
    out[i] = dataclasses.replace(out[i], **changes)  # type: ignore[type-var]
    return out


def test_fresh_recovery_both_sides() -> None:
    assert claim_fresh_recovery(GOOD, CFG).holds
    assert not claim_fresh_recovery(_swap(GOOD, 2, fresh=0.95), CFG).holds
    missing = claim_fresh_recovery(GOOD[:2], CFG)
    assert not missing.holds and "not_tested" in missing.evidence


def test_coupled_and_protected_stay_both_sides() -> None:
    assert claim_coupled_protected_stay(GOOD, CFG).holds
    bad = claim_coupled_protected_stay(_swap(GOOD, 1, protected=SINGLE + 0.05), CFG)
    assert not bad.holds and bad.evidence["worst"] == pytest.approx(0.05)
    assert "not_tested" in claim_coupled_protected_stay(GOOD[:1], CFG).evidence


def test_fresh_matches_theory_both_sides() -> None:
    assert claim_fresh_matches_theory(GOOD, CFG).holds
    off = claim_fresh_matches_theory(_swap(GOOD, 1, fresh=0.85), CFG)
    assert not off.holds and off.evidence["mismatches"] == 1
    below_hoeffding = _swap(GOOD, 1, hoeffding=0.95)
    assert not claim_fresh_matches_theory(below_hoeffding, CFG).holds


def test_positional_coupling_both_sides() -> None:
    assert claim_positional_coupling_fragile(GOOD, CFG).holds
    stays = _swap(GOOD, 1, coupled_adversary_first=SINGLE + 0.01)
    assert not claim_positional_coupling_fragile(stays, CFG).holds
    only_small_k = claim_positional_coupling_fragile(GOOD[:1], CFG)
    assert not only_small_k.holds and "not_tested" in only_small_k.evidence


def _adv(fresh: float, protected: float) -> list[Row]:
    return [
        AdvantageRow("fresh", 1.0, 51, 300, fresh),
        AdvantageRow("protected", 1.0, 51, 300, protected),
    ]


def test_advantage_both_sides() -> None:
    assert claim_advantage(_adv(1.0, 0.46), CFG).holds
    assert not claim_advantage(_adv(1.0, 0.7), CFG).holds  # protected above tanh(1/2) + margin
    assert not claim_advantage(_adv(0.5, 0.46), CFG).holds  # fresh within the limit
    no_deletions = [AdvantageRow(r, 1.0, 0, 300, 0.46) for r in ("fresh", "protected")]
    untested = claim_advantage(no_deletions, CFG)  # deletions = [0]: nothing to compare
    assert not untested.holds and "not_tested" in untested.evidence


def test_exact_sum_both_sides() -> None:
    assert claim_exact_sum([ExactSumRow(1e-15, 4e-14, 0.1)], CFG).holds
    leaks = claim_exact_sum([ExactSumRow(1e-15, 0.02, 0.1)], CFG)
    assert not leaks.holds and leaks.evidence["same_sum_gap"] == 0.02
    assert not claim_exact_sum([ExactSumRow(0.3, 0.0, 0.1)], CFG).holds
    assert "not_tested" in claim_exact_sum([ExactSumRow(0.0, 0.0, 0.0)], CFG).evidence


def _lr(fresh_err: float, coupled_err: float, gain_lower: float) -> list[Row]:
    return [
        LogRegRow("fresh", 0, 12.0, 0.51, 0.0),
        LogRegRow("fresh", 51, fresh_err, 0.55, gain_lower),
        LogRegRow("coupled", 0, 12.0, 0.51, 0.0),
        LogRegRow("coupled", 51, coupled_err, 0.51, -0.03),
    ]


def test_logreg_averaging_both_sides() -> None:
    assert claim_logreg_averaging(_lr(2.3, 14.0, 0.01), CFG).holds
    assert not claim_logreg_averaging(_lr(8.0, 14.0, 0.01), CFG).holds  # fresh error not halved
    assert not claim_logreg_averaging(_lr(2.3, 5.0, 0.01), CFG).holds  # coupled averages out


def test_logreg_membership_uses_the_interval_not_the_point_gain() -> None:
    assert claim_logreg_membership(_lr(2.3, 14.0, 0.01), CFG).holds
    noisy = claim_logreg_membership(_lr(2.3, 14.0, -0.02), CFG)
    assert not noisy.holds and noisy.evidence["gain"] > 0  # point gain positive, interval not
    first_only = claim_logreg_membership([LogRegRow("fresh", 0, 12.0, 0.51, 0.0)], CFG)
    assert "not_tested" in first_only.evidence
