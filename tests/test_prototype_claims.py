"""Seed 11 claims as pure functions of run rows: each one on synthetic rows where it must hold
and where it must fail (comparisons are seed-paired one-sided intervals, not means)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import SimpleNamespace

from trainleak.experiments.prototype_claims import (
    CLAIMS,
    MASK_NAMES,
    RunRow,
    claim_coverage_best,
    claim_coverage_raises_sr,
    claim_harm_not_fit_failure,
    claim_overlap_harmful,
    claim_separation_large_tau,
    summary,
)

CFG = SimpleNamespace(tau=0.01)
SIZES, SEEDS, TAUS = (3, 10), range(6), (1e-3, 1e-2, 1e-1, 1.0)
Field = Callable[[int, str, int], float]


def _jitter(seed: int) -> float:
    return 0.01 * ((seed * 7) % 5 - 2)  # seed-level noise shared by every mask (paired)


def _err(n: int, m: str, s: int) -> float:
    return 0.3 - 0.1 * ("C" in m) + 0.05 * ("O" in m) + 0.002 * len(m) + _jitter(s)


def _rows(err: Field = _err, sr: Field | None = None, hull: Field | None = None,
          sweep_hull: Callable[[float, int], float] | None = None) -> list[RunRow]:  # fmt: skip
    sr = sr or (lambda n, m, s: 0.6 + 0.1 * ("C" in m) + _jitter(s))
    hull = hull or (lambda n, m, s: 0.05 + 0.3 * ("O" in m) + _jitter(s))
    sweep_hull = sweep_hull or (lambda t, s: 0.05 + 0.5 * t + abs(_jitter(s)))
    rows = [
        RunRow(n, m, 0.01, s, False, err(n, m, s), sr(n, m, s), hull(n, m, s), 1e-6, n, 0)
        for n in SIZES for m in MASK_NAMES for s in SEEDS
    ]  # fmt: skip
    rows = [dataclasses.replace(r, outside_hull=sweep_hull(0.01, r.seed))
            if r.size == max(SIZES) and r.mask == "S" else r for r in rows]  # fmt: skip
    rows += [
        RunRow(max(SIZES), "S", t, s, True, 0.2, 0.6, sweep_hull(t, s), 1e-6, 1, 0)
        for t in TAUS if t != 0.01 for s in SEEDS
    ]  # fmt: skip
    return rows


def test_every_claim_holds_on_rows_built_to_satisfy_it() -> None:
    rows = _rows()
    for fn in CLAIMS:
        res = fn(rows, CFG)
        assert res.holds, (fn.__name__, res.evidence)
    assert {r["mask"] for r in summary(rows)} == set(MASK_NAMES)


def test_coverage_best_fails_when_a_mask_without_coverage_is_as_good() -> None:
    def err(n: int, m: str, s: int) -> float:
        return _err(n, m, s) - (0.1 if m == "S" else 0.0)  # S alone as good as C

    res = claim_coverage_best(_rows(err), CFG)
    assert not res.holds and "S" in res.evidence["best_other_mask"]


def test_coverage_best_fails_on_noise_level_differences() -> None:
    def err(n: int, m: str, s: int) -> float:  # C ahead in the mean by less than the noise
        return 0.3 + (0.05 if (s + ("C" in m)) % 2 else -0.05) - 0.002 * ("C" in m)

    assert not claim_coverage_best(_rows(err), CFG).holds


def test_coverage_sr_both_sides() -> None:
    def sr(n: int, m: str, s: int) -> float:
        c = "C" in m  # at N = 10 coverage leads by 0.001, far inside the seed noise
        return 0.6 + (0.1 * c if n == 3 else 0.001 * c + 0.05 * ((s + c) % 2))

    res = claim_coverage_raises_sr(_rows(sr=sr), CFG)
    assert not res.holds and res.evidence["sr_gain_lower_bound"][0] > 0


def test_overlap_harm_both_sides() -> None:
    def err(n: int, m: str, s: int) -> float:
        return _err(n, m, s) - (0.06 if m == "C+O" else 0.0)  # overlap helps with coverage

    res = claim_overlap_harmful(_rows(err), CFG)
    assert not res.holds and res.evidence["share_of_comparisons_harmed"] == 0.75


def test_harm_not_fit_failure_both_sides() -> None:
    bad_fit = [dataclasses.replace(r, fit_mse=1e-2) if "O" in r.mask else r for r in _rows()]
    res = claim_harm_not_fit_failure(bad_fit, CFG)
    assert not res.holds and res.evidence["fit_ratio_upper_bound"] > 2
    no_escape = _rows(hull=lambda n, m, s: 0.05 + _jitter(s))
    assert not claim_harm_not_fit_failure(no_escape, CFG).holds


def test_separation_sweep_both_sides() -> None:
    flat = _rows(sweep_hull=lambda t, s: 0.05 + abs(_jitter(s)))
    assert not claim_separation_large_tau(flat, CFG).holds
    high_start = _rows(sweep_hull=lambda t, s: 0.3 + 0.5 * t)
    res = claim_separation_large_tau(high_start, CFG)
    assert not res.holds and res.evidence["excess_over_plain_upper_bound"] > 0.05
    one_tau = [r for r in _rows() if not r.sweep]
    res = claim_separation_large_tau(one_tau, CFG)
    assert not res.holds and "not_tested" in res.evidence
