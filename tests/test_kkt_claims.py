"""Both sides of every claim of ``kkt-reconstruction`` and ``optimizer-fingerprints``.

Each claim is a pure function of typed rows; synthetic rows make it hold and make it fail.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from trainleak.experiments._fingerprint_claims import (
    FingerprintRow,
    claim_adam_resists,
    claim_gd_reconstructs,
    claim_muon_cheaper,
    claim_muon_reconstructs,
)
from trainleak.experiments._kkt_claims import (
    CLAIMS,
    RunRow,
    claim_beats_baselines_04,
    claim_beats_baselines_06,
    claim_beats_oracle_04,
    claim_beats_oracle_06,
    claim_leak_from_training,
    claim_margin,
    claim_sample_specific,
)
from trainleak.experiments._kkt_common import ScoreRow, exceeds
from trainleak.experiments.optimizer_fingerprints import FingerprintConfig

N = 100


def score_row(
    seed: int,
    method: str,
    role: str,
    ssim_04: int,
    *,
    ssim_06: int = 0,
    specific: int = 0,
    optimizer: str = "gd",
    n: int = N,
) -> ScoreRow:
    return ScoreRow(
        dataset="mnist",
        optimizer=optimizer,
        seed=seed,
        method=method,
        role=role,  # type: ignore[arg-type]
        n=n,
        candidates=2 * n,
        ssim_04=ssim_04,
        ssim_06=ssim_06,
        median_ssim=0.3,
        mean_top10_ssim=0.5,
        specific=specific,
        specific_ssim_04=min(specific, ssim_04),
        median_ratio=1.1,
    )


def run_row(seed: int, margin: float = 5.0) -> RunRow:
    return RunRow(seed, N, 1e-4, margin, 1.0, 1.0, 0.1, 0.9)


def kkt_rows(
    attack: Sequence[int],
    heldout: Sequence[int],
    oracle: Sequence[int],
    control: Sequence[int] | None,
    *,
    key: str = "ssim_04",
) -> list[object]:
    """Rows of several seeds; ``key`` gets the given values, every other count is 0."""
    rows: list[object] = []
    for seed, (a, h, o) in enumerate(zip(attack, heldout, oracle)):
        rows.append(run_row(seed))
        methods = [("kkt attack", "attack", a), ("held-out images", "baseline", h)]
        methods += [("random uniform", "baseline", 0), ("class means", "oracle", o)]
        if control is not None:
            methods.append(("kkt on untrained net", "control", control[seed]))
        for name, role, v in methods:
            counts = {"ssim_04": 0, "ssim_06": 0, "specific": 0, key: v}
            rows.append(
                score_row(
                    seed,
                    name,
                    role,
                    counts["ssim_04"],
                    ssim_06=counts["ssim_06"],
                    specific=counts["specific"],
                )
            )
    return rows


def test_claims_tuple_lists_every_kkt_claim() -> None:
    assert len(CLAIMS) == 7
    assert claim_margin in CLAIMS and claim_sample_specific in CLAIMS


def test_exceeds_needs_intervals_not_means() -> None:
    assert exceeds([30, 32, 29], [10, 12, 11], N)[0]
    # a mean difference of 2.3 with a spread of 18: not a finding
    assert not exceeds([30, 10, 30], [10, 25, 28], N)[0]
    # one seed: Wilson intervals over the n training images must not overlap
    assert exceeds([40], [10], N)[0]
    assert not exceeds([15], [10], N)[0]
    with pytest.raises(ValueError):
        exceeds([1, 2], [1], N)


def test_margin_claim_both_sides() -> None:
    assert claim_margin([run_row(0, 8.0), run_row(1, 5.0)], None).holds
    bad = claim_margin([run_row(0, 8.0), run_row(1, 0.5)], None)
    assert not bad.holds and bad.evidence["min_margin"] == [8.0, 0.5]
    assert "not_tested" in claim_margin([], None).evidence


@pytest.mark.parametrize(
    "key,fn", [("ssim_04", claim_beats_baselines_04), ("ssim_06", claim_beats_baselines_06)]
)
def test_beats_equal_budget_baselines_both_sides(key: str, fn: object) -> None:
    holds = fn(kkt_rows([30, 32, 29], [10, 12, 11], [50, 50, 50], [1, 1, 1], key=key), None)  # type: ignore[operator]
    assert holds.holds
    assert holds.evidence["best_baseline_method"] == ["held-out images"] * 3
    # the held-out images match the attack: fails
    assert not fn(kkt_rows([30, 32, 29], [31, 35, 28], [0, 0, 0], [1, 1, 1], key=key), None).holds  # type: ignore[operator]
    # the untrained control is an equal-budget baseline too
    assert not fn(kkt_rows([30, 32, 29], [1, 1, 1], [0, 0, 0], [30, 33, 29], key=key), None).holds  # type: ignore[operator]


@pytest.mark.parametrize(
    "key,fn", [("ssim_04", claim_beats_oracle_04), ("ssim_06", claim_beats_oracle_06)]
)
def test_beats_oracle_both_sides(key: str, fn: object) -> None:
    assert fn(kkt_rows([60, 62, 61], [90, 90, 90], [20, 22, 21], None, key=key), None).holds  # type: ignore[operator]
    failing = fn(kkt_rows([21, 14, 25], [0, 0, 0], [82, 80, 85], None, key=key), None)  # type: ignore[operator]
    assert not failing.holds
    assert failing.evidence["best_baseline"] == [82.0, 80.0, 85.0]


def test_leak_from_training_both_sides() -> None:
    rows: list[object] = []
    for seed in range(3):
        rows += [
            run_row(seed),
            score_row(seed, "kkt attack", "attack", 30 + seed, specific=20 + seed),
            score_row(seed, "kkt on untrained net", "control", 1, specific=0),
        ]
    assert claim_leak_from_training(rows, None).holds
    # SSIM counts differ but specificity does not: the claim needs both
    same_specific = [
        score_row(r.seed, r.method, r.role, r.ssim_04, specific=5) if isinstance(r, ScoreRow) else r
        for r in rows
    ]
    assert not claim_leak_from_training(same_specific, None).holds
    no_control = [r for r in rows if not (isinstance(r, ScoreRow) and r.role == "control")]
    assert "not_tested" in claim_leak_from_training(no_control, None).evidence


def test_sample_specific_counts_against_every_baseline_and_the_oracle() -> None:
    holds = kkt_rows([25, 30, 27], [2, 3, 1], [0, 0, 0], [1, 0, 2], key="specific")
    assert claim_sample_specific(holds, None).holds
    # the oracle class means are not sample-specific, but if they score as high, no claim
    oracle_high = kkt_rows([25, 30, 27], [2, 3, 1], [26, 30, 27], [1, 0, 2], key="specific")
    assert not claim_sample_specific(oracle_high, None).holds
    # high SSIM counts do not make the specificity claim hold
    ssim_only = kkt_rows([90, 90, 90], [10, 10, 10], [10, 10, 10], [0, 0, 0], key="ssim_04")
    assert not claim_sample_specific(ssim_only, None).holds


# ---------------------------------------------------------------- optimizer-fingerprints


def fp_run(opt: str, seed: int, steps: int | None, budget: int = 3000) -> FingerprintRow:
    return FingerprintRow(
        "mnist", opt, seed, "l2", budget, steps, None, 1e-3, 2.0, 1.0, 0.5, 0.1, 0.1, 0.5, 0.5
    )


def fp_rows(
    counts: dict[str, Sequence[int]],
    baseline: Sequence[int],
    steps: dict[str, Sequence[int | None]] | None = None,
    l2_counts: dict[str, Sequence[int]] | None = None,
) -> list[object]:
    """Rows for optimizers -> own-target counts per seed; one held-out baseline per seed."""
    rows: list[object] = []
    for opt, own in counts.items():
        for seed, c in enumerate(own):
            st = (steps or {}).get(opt, [100] * len(own))[seed]
            rows.append(fp_run(opt, seed, st, budget=1000 if opt == "muon" else 3000))
            l2 = (l2_counts or {}).get(opt, own)[seed]
            rows += [
                score_row(seed, "own target", "attack", c, optimizer=opt, n=20),
                score_row(seed, "l2 target", "variant", l2, optimizer=opt, n=20),
                score_row(seed, "held-out images", "baseline", baseline[seed], optimizer=opt, n=20),
                score_row(seed, "class means", "oracle", 19, optimizer=opt, n=20),
            ]
    return rows


CFG = FingerprintConfig()


def test_gd_and_muon_reconstruct_both_sides() -> None:
    rows = fp_rows({"gd": [12, 13, 12], "muon": [11, 12, 11]}, [3, 4, 3])
    assert claim_gd_reconstructs(rows, CFG).holds
    assert claim_muon_reconstructs(rows, CFG).holds
    assert claim_gd_reconstructs(rows, CFG).text.startswith("mnist: GD")
    # a spread larger than the mean difference does not pass (the old claim counted it)
    noisy = fp_rows({"gd": [12, 1, 10], "muon": [4, 4, 3]}, [3, 4, 3])
    assert not claim_gd_reconstructs(noisy, CFG).holds
    assert not claim_muon_reconstructs(noisy, CFG).holds
    # the oracle reference is not an equal-budget baseline: it does not make the claim fail
    assert (
        claim_gd_reconstructs(rows, CFG).evidence["best_baseline_method"] == ["held-out images"] * 3
    )


def test_muon_cheaper_both_sides() -> None:
    counts = {"gd": [12, 13, 12], "muon": [12, 13, 12]}
    fast = {"gd": [2000, 2200, 2100], "muon": [300, 350, 320]}
    assert claim_muon_cheaper(fp_rows(counts, [3, 3, 3], fast), CFG).holds
    # GD never reaching the margin counts at its budget + 1: still slower than Muon
    censored = {"gd": [None, None, 2100], "muon": [300, 350, 320]}
    assert claim_muon_cheaper(fp_rows(counts, [3, 3, 3], censored), CFG).holds
    slow = {"gd": [300, 350, 320], "muon": [2000, 2200, 2100]}
    assert not claim_muon_cheaper(fp_rows(counts, [3, 3, 3], slow), CFG).holds
    # cheaper but clearly worse at reconstruction: fails the non-inferiority margin
    worse = {"gd": [15, 16, 15], "muon": [5, 6, 5]}
    assert not claim_muon_cheaper(fp_rows(worse, [3, 3, 3], fast), CFG).holds
    no_margin = {"gd": [2000, 2200, 2100], "muon": [300, None, 320]}
    assert not claim_muon_cheaper(fp_rows(counts, [3, 3, 3], no_margin), CFG).holds
    one_seed = fp_rows({"gd": [12], "muon": [12]}, [3], {"gd": [2000], "muon": [300]})
    assert "not_tested" in claim_muon_cheaper(one_seed, CFG).evidence


def test_adam_resists_is_conditional_on_gd_reconstructing() -> None:
    good = fp_rows({"gd": [12, 13, 12], "adam-eps1e-16": [3, 3, 4]}, [3, 3, 3])
    assert claim_adam_resists(good, CFG).holds
    # either target counts: Adam's l2-target reconstruction as good as GD's -> not resisting
    l2_good = fp_rows(
        {"gd": [12, 13, 12], "adam-eps1e-16": [3, 3, 4]},
        [3, 3, 3],
        l2_counts={"adam-eps1e-16": [12, 13, 12]},
    )
    assert not claim_adam_resists(l2_good, CFG).holds
    # GD fails too: "Adam resists" cannot be decided, and is not counted as holding
    nothing = fp_rows({"gd": [3, 4, 3], "adam-eps1e-16": [0, 0, 0]}, [3, 3, 3])
    verdict = claim_adam_resists(nothing, CFG)
    assert not verdict.holds and "GD does not reconstruct" in verdict.evidence["not_tested"]
