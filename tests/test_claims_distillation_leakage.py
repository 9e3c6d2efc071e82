"""Claims of ``distillation-leakage`` on synthetic rows: each must hold and must fail."""

from __future__ import annotations

import dataclasses

import pydantic
import pytest
import torch

from trainleak.errors import ConfigError
from trainleak.experiments._distillation_figures import confusion_figure, pairs, roc_figure, tile
from trainleak.experiments.distillation_leakage import run as run_experiment
from trainleak.experiments.distillation_leakage_claims import (
    CLAIMS,
    DistillationLeakageConfig,
    MembershipRow,
    RecoveryRow,
    RevelationRow,
    UtilityRow,
    claim_beats_random,
    claim_membership_real_init,
    claim_real_init_leaks_more,
    claim_recovery_dm,
    claim_recovery_real_beats_noise,
    claim_reveals_algorithm,
    claim_reveals_architecture,
    claim_surrogate_membership,
)
from trainleak.metrics.intervals import difference_lower_bound

CFG = DistillationLeakageConfig(algorithms=["dc", "dm"], architectures=["mlp", "convnet"])
PAIRS = [(a, f) for a in ("dc", "dm") for f in ("mlp", "convnet")]


def _urow(a: str, f: str, ipc: int, seed: int, dist: list[float], rand: list[float]) -> UtilityRow:
    return UtilityRow(
        a, f, ipc, "real", seed, sum(dist) / 2, sum(rand) / 3, 0.95, tuple(dist), tuple(rand)
    )


def _utility(gain: float) -> list[UtilityRow]:
    """Two seeds per setting (two networks each), one random baseline of three draws."""
    rows = []
    for i, (a, f) in enumerate(PAIRS):
        for ipc in (1, 10):
            base = 0.7 + 0.01 * i
            rand = [base - 0.01, base, base + 0.01]
            for seed in (0, 1):
                dist = [base + gain - 0.005 + 0.01 * seed, base + gain + 0.005]
                rows.append(_urow(a, f, ipc, seed, dist, rand))
    return rows


def test_beats_random_holds_when_every_setting_gains() -> None:
    good = claim_beats_random(_utility(0.05), CFG)
    assert good.holds and not good.evidence["failing"]
    assert len(good.evidence["settings"]) == 8  # 2 algorithms x 2 architectures x 2 ipc
    assert all(v["gain_lower_95"] > 0 for v in good.evidence["settings"].values())
    # the unit is a distilled set: two sets (seeds) of two networks per setting here
    assert {v["n"] for v in good.evidence["settings"].values()} == {(2, 3)}
    assert {tuple(v["networks_per_set"]) for v in good.evidence["settings"].values()} == {(2,)}


def test_beats_random_takes_the_set_as_its_unit_not_the_network() -> None:
    """Two sets per setting, each with four networks that agree closely, the sets 0.06
    apart: an interval over the eight networks would credit the setting, one over the two
    sets does not (the next distillation could land anywhere between them)."""
    rand = [0.69, 0.70, 0.71]
    rows = [
        _urow(a, f, 10, seed, [0.7 + gain + d for d in (-0.002, 0.0, 0.0, 0.002)], rand)
        for a, f in PAIRS
        for seed, gain in ((0, 0.08), (1, 0.02))
    ]
    pooled = [v for r in rows[:2] for v in r.distilled_accs]
    assert difference_lower_bound(pooled, rand, paired=False) > 0.02  # networks as the unit
    bad = claim_beats_random(rows, CFG)
    assert not bad.holds and len(bad.evidence["failing"]) == len(PAIRS)
    assert bad.evidence["settings"]["dc/mlp/ipc10"]["set_means"] == pytest.approx([0.78, 0.72])
    # the same sets 0.01 apart: the set-level interval credits them
    close = [
        dataclasses.replace(r, distilled_accs=tuple(v - 0.05 for v in r.distilled_accs))
        if r.seed == 0
        else dataclasses.replace(r, distilled_accs=tuple(v + 0.01 for v in r.distilled_accs))
        for r in rows
    ]
    assert claim_beats_random(close, CFG).holds


def test_beats_random_fails_on_one_losing_setting_even_when_the_mean_gain_is_positive() -> None:
    rows = _utility(0.05)
    # one setting loses by 0.01 while the mean gain over settings stays clearly positive
    rows = [
        dataclasses.replace(
            r,
            distilled_accs=tuple(v - 0.06 for v in r.distilled_accs),
            distilled_acc=r.distilled_acc - 0.06,
        )
        if (r.algorithm, r.architecture, r.ipc) == ("dc", "mlp", 10)
        else r
        for r in rows
    ]
    bad = claim_beats_random(rows, CFG)
    assert not bad.holds
    assert bad.evidence["failing"] == ["dc/mlp/ipc10"]
    gains = [v["distilled"] - v["random"] for v in bad.evidence["settings"].values()]
    assert sum(gains) / len(gains) > 0.03


def test_beats_random_fails_when_the_interval_is_too_wide() -> None:
    rows = [
        dataclasses.replace(r, distilled_accs=(r.random_acc + 0.3, r.random_acc - 0.25))
        if r.ipc == 1 and r.seed == 0
        else r
        for r in _utility(0.05)
    ]
    assert claim_beats_random(_utility(0.05), CFG).holds  # the same settings, narrow intervals
    bad = claim_beats_random(rows, CFG)
    assert not bad.holds
    assert bad.evidence["failing"] == [
        "dc/convnet/ipc1",
        "dc/mlp/ipc1",
        "dm/convnet/ipc1",
        "dm/mlp/ipc1",
    ]


def test_beats_random_counts_noise_init_out_and_needs_two_values_a_side() -> None:
    noise = [dataclasses.replace(r, init="noise", distilled_accs=(0.1, 0.1)) for r in _utility(0)]
    assert claim_beats_random(_utility(0.05) + noise, CFG).holds
    one = [dataclasses.replace(r, random_accs=(0.7,)) for r in _utility(0.05)]
    assert "not_tested" in claim_beats_random(one, CFG).evidence
    one_set = [r for r in _utility(0.05) if r.seed == 0]  # one set, two networks, per setting
    why = claim_beats_random(one_set, CFG).evidence["not_tested"]
    assert "fewer than two distilled sets" in why
    assert "not_tested" in claim_beats_random(noise, CFG).evidence


def _revelation(wrong: int, field: str) -> list[RevelationRow]:
    rows = []
    for i, (a, f) in enumerate(PAIRS * 3):
        pa, pf = a, f
        if i < wrong:
            pa, pf = (
                ("dm" if a == "dc" else "dc", f)
                if field == "algorithm"
                else (a, "mlp" if f == "convnet" else "convnet")
            )
        rows.append(RevelationRow(a, f, "real", i, pa, pf, 0.9, 0.9))
    return rows


def test_revelation_claims_both_sides() -> None:
    for fn, field in (
        (claim_reveals_algorithm, "algorithm"),
        (claim_reveals_architecture, "architecture"),
    ):
        assert fn(_revelation(1, field), CFG).holds  # 11 / 12
        bad = fn(_revelation(4, field), CFG)  # 8 / 12 < 0.8
        assert not bad.holds and bad.evidence["accuracy"] < 0.8
        assert "not_tested" in fn([], CFG).evidence
    noise_only = [dataclasses.replace(r, init="noise") for r in _revelation(0, "algorithm")]
    assert "not_tested" in claim_reveals_algorithm(noise_only, CFG).evidence


def test_revelation_fails_on_few_targets_when_the_bound_does_not_clear_chance() -> None:
    """The MNIST benchmark's case (two architectures, six targets, one wrong): accuracy 5/6
    meets 0.8, but its Wilson lower bound (about 0.44) is under chance 1/2, so the claim is
    false; all six right clears it (bound about 0.61)."""
    six = _revelation(1, "architecture")[:6]
    bad = claim_reveals_architecture(six, CFG)
    assert bad.evidence["accuracy"] >= 0.8 and bad.evidence["wilson_95"][0] < 0.5
    assert not bad.holds
    good = claim_reveals_architecture(_revelation(0, "architecture")[:6], CFG)
    assert good.holds and good.evidence["wilson_95"][0] > 0.5


def _membership(
    method: str, real_auroc: float, noise_auroc: float, tpr: float
) -> list[MembershipRow]:
    rows = []
    for i, (a, f) in enumerate(PAIRS):
        jitter = 0.01 * (i % 2)
        rows.append(
            MembershipRow(
                a, f, "real", 0, method, "init", real_auroc - jitter, tpr, tpr / 2, 40, 197
            )
        )
        rows.append(
            MembershipRow(
                a, f, "noise", 0, method, "init", noise_auroc + jitter, 0.01, 0.0, 40, 197
            )
        )
        rows.append(MembershipRow(a, f, "real", 0, method, "members", 0.55, 0.02, 0.0, 800, 197))
    return rows


def test_membership_claims_both_sides() -> None:
    good = _membership("nn", 0.98, 0.5, 0.6)
    assert claim_membership_real_init(good, CFG).holds
    assert claim_real_init_leaks_more(good, CFG).holds
    low_tpr = claim_membership_real_init(_membership("nn", 0.98, 0.5, 0.1), CFG)
    assert not low_tpr.holds and low_tpr.evidence["tpr1_lower_95"] < 0.3
    same = _membership("nn", 0.6, 0.6, 0.1)
    assert not claim_membership_real_init(same, CFG).holds
    assert not claim_real_init_leaks_more(same, CFG).holds
    other_method = _membership("loss", 0.98, 0.5, 0.6)
    assert "not_tested" in claim_membership_real_init(other_method, CFG).evidence


def test_surrogate_membership_both_sides() -> None:
    assert claim_surrogate_membership(_membership("lira", 0.7, 0.5, 0.1), CFG).holds
    assert not claim_surrogate_membership(_membership("lira", 0.5, 0.5, 0.01), CFG).holds
    assert (
        "not_tested" in claim_surrogate_membership(_membership("nn", 0.9, 0.5, 0.5), CFG).evidence
    )


def _recovery(
    real_share: float,
    real_ssim: float,
    noise_ssim: float,
    strict: float = 0.6,
    base: float = 0.1,
    base_share: float = 0.95,
) -> list[RecoveryRow]:
    rows = []
    for i, (a, f) in enumerate(PAIRS):
        j = 0.01 * i
        common = dict(
            baseline_mean_ssim=0.7,
            baseline_share=base_share,
            baseline_strict_share=base,
            threshold=0.5,
            strict_threshold=0.9,
            n=100,
        )
        rows.append(RecoveryRow(a, f, "real", 10, 0, real_ssim + j, real_share, strict, **common))
        rows.append(RecoveryRow(a, f, "noise", 10, 0, noise_ssim - j, 0.9, 0.05, **common))
    return rows


def test_recovery_claims_both_sides() -> None:
    good = _recovery(0.8, 0.8, 0.3)
    assert claim_recovery_dm(good, CFG).holds
    assert claim_recovery_real_beats_noise(good, CFG).holds
    half = claim_recovery_dm(_recovery(0.45, 0.8, 0.3), CFG)
    assert not half.holds and half.evidence["share"] < 0.5
    like_baseline = claim_recovery_dm(_recovery(1.0, 0.8, 0.3, strict=0.12, base=0.1), CFG)
    assert not like_baseline.holds and like_baseline.evidence["share"] == 1.0
    assert not claim_recovery_real_beats_noise(_recovery(0.8, 0.3, 0.4), CFG).holds
    assert "not_tested" in claim_recovery_dm([r for r in good if r.algorithm != "dm"], CFG).evidence


def test_recovery_compares_with_the_baseline_where_the_baseline_is_not_saturated() -> None:
    # CIFAR-10-like: random auxiliary images recover nothing at 0.5, the release most images
    # and almost no near-copies: beating the baseline at 0.5 is the evidence
    cifar = claim_recovery_dm(
        _recovery(0.93, 0.7, 0.1, strict=0.0075, base=0.0, base_share=0.0), CFG
    )
    assert cifar.holds and cifar.evidence["compared_at"] == 0.5
    assert cifar.evidence["strict_share"] < cifar.evidence["baseline_strict_upper_95"]
    # the baseline under half but within the release's interval at 0.5 (0.49 against 0.60 of
    # 200 images): fails, however many near-copies the release has
    level = claim_recovery_dm(_recovery(0.6, 0.7, 0.1, strict=0.5, base=0.0, base_share=0.49), CFG)
    assert not level.holds and level.evidence["compared_at"] == 0.5
    assert level.evidence["share_lower_95"] >= 0.5
    # the baseline at exactly half is saturated: the comparison moves to the strict threshold
    moved = claim_recovery_dm(_recovery(0.9, 0.7, 0.1, strict=0.02, base=0.0, base_share=0.5), CFG)
    assert not moved.holds and moved.evidence["compared_at"] == 0.9


def test_every_claim_is_listed() -> None:
    assert len(CLAIMS) == 8 and len(set(CLAIMS)) == 8


def test_display_helpers_build_images_and_figures() -> None:
    assert tile(torch.rand(12, 1, 8, 8), 5).shape == (3 * 33 + 1, 5 * 33 + 1)
    assert pairs(torch.rand(7, 1, 8, 8), torch.rand(7, 1, 8, 8), cols=5).shape[0] == 4 * 33 + 1
    assert tile(torch.rand(3, 3, 32, 32), 2).shape == (67, 67, 3)
    assert len(confusion_figure(_revelation(2, "algorithm")).axes) == 2
    member = torch.arange(10) < 5
    assert roc_figure({"nn": (torch.arange(10.0).flip(0), member)}).axes


def test_a_bad_learning_rate_grid_is_refused_before_any_distillation(tmp_path) -> None:
    with pytest.raises(pydantic.ValidationError):
        DistillationLeakageConfig(eval_lr_grid=[0.01, -0.05])
    with pytest.raises(pydantic.ValidationError):
        DistillationLeakageConfig(eval_lr_grid=[])
    cfg = DistillationLeakageConfig(eval_lr_grid=[0.05, 0.05], cache_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="lr_grid"):
        run_experiment(cfg)
    assert not any(tmp_path.iterdir())  # nothing was distilled or cached
