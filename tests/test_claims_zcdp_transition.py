"""Claims of ``zcdp-transition`` on synthetic rows: each must hold and must fail."""

from __future__ import annotations

import dataclasses
import math

import pytest

from trainleak.experiments.zcdp_transition import (
    TransitionRow,
    ZCDPTransitionConfig,
    claim_bound_below_attack,
    claim_digits_pca,
    claim_fixed_rho_over_d,
    claim_impossible_then_practical,
    claim_subspace_shift,
    rho_half,
)

CFG = ZCDPTransitionConfig(subspace_dim=256, subspace_rank=8)
RATIOS = (0.1, 1.0, 10.0, 100.0)


def _sweep(tag: str, d: int, unit: int, crossing: float, bound: bool = True) -> list[TransitionRow]:
    """Rows whose cosine is 0 below ``crossing`` (in rho/unit) and 1 above it."""
    rows = []
    for r in RATIOS:
        cos = 1.0 if r >= crossing else 0.0
        mse = 0.05 if cos else 1.0
        rows.append(
            TransitionRow(tag, d, r * unit, r, mse, 0.01, cos, 30, 0, 0.5 * mse if bound else None)
        )
    return rows


def test_rho_half_interpolates_the_crossing() -> None:
    rows = _sweep("sphere", 16, 16, crossing=10.0)
    assert rho_half(rows) == pytest.approx(16 * (1.0 * 10.0) ** 0.5)  # log-midpoint of 16, 160
    assert math.isnan(rho_half(_sweep("sphere", 16, 16, crossing=1e6)))  # no crossing


def test_bound_below_attack_both_sides() -> None:
    rows = _sweep("sphere", 16, 16, 10.0)
    assert claim_bound_below_attack(rows, CFG).holds
    above = [dataclasses.replace(rows[0], bound=1.2)] + rows[1:]  # bound above mean + 2 SE
    bad = claim_bound_below_attack(above, CFG)
    assert not bad.holds and bad.evidence["min_margin"] == pytest.approx(1.02 - 1.2)
    digits_only = _sweep("digits:none", 64, 64, 10.0, bound=False)
    assert "not_tested" in claim_bound_below_attack(digits_only, CFG).evidence


def test_fixed_rho_over_d_both_sides_and_one_d_is_not_tested() -> None:
    same = _sweep("sphere", 16, 16, 10.0) + _sweep("sphere", 64, 64, 10.0)
    assert claim_fixed_rho_over_d(same, CFG).holds
    apart = _sweep("sphere", 16, 16, 1.0) + _sweep("sphere", 64, 64, 100.0)
    assert not claim_fixed_rho_over_d(apart, CFG).holds  # 100x apart
    one_d = claim_fixed_rho_over_d(_sweep("sphere", 16, 16, 10.0), CFG)
    assert not one_d.holds and "two d" in one_d.evidence["not_tested"]
    no_cross = _sweep("sphere", 16, 16, 10.0) + _sweep("sphere", 64, 64, 1e6)
    assert "not_tested" in claim_fixed_rho_over_d(no_cross, CFG).evidence


def test_impossible_then_practical_uses_the_interval() -> None:
    rows = _sweep("sphere", 16, 16, 10.0)
    assert claim_impossible_then_practical(rows, CFG).holds
    wide = [dataclasses.replace(r, mse_se=0.15) for r in rows]  # 1 - 0.3 < 0.8
    assert not claim_impossible_then_practical(wide, CFG).holds
    easy = [dataclasses.replace(r, mse=0.5) if r.rho_over_d <= 0.1 else r for r in rows]
    assert not claim_impossible_then_practical(easy, CFG).holds
    narrow = [r for r in rows if 0.1 < r.rho_over_d < 100]
    assert "not_tested" in claim_impossible_then_practical(narrow, CFG).evidence


def test_subspace_shift_both_sides() -> None:
    none = _sweep("subspace:none", 256, 256, 10.0)
    known = _sweep("subspace:known", 256, 8, 10.0)  # rho unit s: the crossing moves by d/s
    assert claim_subspace_shift(none + known, CFG).holds
    unmoved = _sweep("subspace:known", 256, 256, 10.0)
    bad = claim_subspace_shift(none + unmoved, CFG)
    assert not bad.holds and bad.evidence["shift"] == pytest.approx(1.0)
    never = _sweep("subspace:known", 256, 8, 1e6)
    assert "not_tested" in claim_subspace_shift(none + never, CFG).evidence


def test_digits_pca_both_sides() -> None:
    none = _sweep("digits:none", 64, 64, 100.0, bound=False)
    assert claim_digits_pca(none + _sweep("digits:pca", 64, 64, 1.0, bound=False), CFG).holds
    later = _sweep("digits:pca", 64, 64, 100.0, bound=False)
    assert not claim_digits_pca(none + later, CFG).holds
    never = _sweep("digits:pca", 64, 64, 1e6, bound=False)
    assert "not_tested" in claim_digits_pca(none + never, CFG).evidence
