"""Claims of split-learning-kdufsl, each on synthetic rows where it holds and where it fails."""

from __future__ import annotations

import dataclasses

import pytest

from trainleak.errors import ConfigError
from trainleak.experiments import get_experiment
from trainleak.experiments.split_learning_kdufsl_claims import (
    CLAIMS,
    AttackRow,
    SplitLearningKDUFSLConfig,
    UtilityRow,
    claim_accuracy_cost,
    claim_attack_is_real,
    claim_k_anonymous,
    claim_monotone_k,
    claim_monotone_sigma,
    claim_mse_rises,
    claim_ssim_falls,
)

CFG = SplitLearningKDUFSLConfig()
ATT = "split-inverse-network"


def _a(setting: str, kind: str, k: int, sigma: float, mse: float, ssim: float) -> AttackRow:
    return AttackRow("mnist", setting, kind, k, sigma, ATT, False, mse, ssim, 0.07, 0.3, 64)


def _u(setting: str, kind: str, k: int, acc: float, mult: int) -> UtilityRow:
    return UtilityRow("mnist", setting, kind, k, 0.0, acc + 0.01, acc, mult, float("nan"))


def _rows(kd_mse: tuple[float, ...] = (0.012, 0.014, 0.015), kd_ssim=(0.7, 0.62, 0.55)):
    rows = [
        _a("vanilla", "vanilla", 1, 0.0, 0.01, 0.9),
        _a("dp_s0.02", "dp", 1, 0.02, 0.011, 0.88),
        _a("dp_s0.05", "dp", 1, 0.05, 0.013, 0.8),
        _a("mdav_k2", "mdav", 2, 0.0, 0.011, 0.85),
        _a("mdav_k4", "mdav", 4, 0.0, 0.012, 0.8),
        _u("vanilla", "vanilla", 1, 0.90, 1),
        _u("mdav_k4", "mdav", 4, 0.89, 4),
    ]
    for k, m, s in zip((2, 4, 8), kd_mse, kd_ssim, strict=True):
        rows.append(_a(f"kd_k{k}", "kd", k, 0.05, m, s))
        rows.append(_u(f"kd_k{k}", "kd", k, 0.88, k))
    return rows


def test_every_claim_holds_on_rows_as_the_seed_states() -> None:
    for fn in CLAIMS:
        c = fn(_rows(), CFG)
        assert c.holds, (fn.__name__, c.evidence)


def test_attack_is_real_fails_when_the_baseline_wins() -> None:
    rows = [_a("vanilla", "vanilla", 1, 0.0, 0.08, 0.2)]
    assert not claim_attack_is_real(rows, CFG).holds
    assert not claim_attack_is_real([], CFG).holds


def test_mse_claim_fails_outside_the_band() -> None:
    assert not claim_mse_rises(_rows(kd_mse=(0.011, 0.011, 0.011)), CFG).holds  # +10 %
    assert not claim_mse_rises(_rows(kd_mse=(0.02, 0.03, 0.04)), CFG).holds  # +300 %
    assert "not_tested" in claim_mse_rises(_rows()[:1], CFG).evidence


def test_ssim_claim_fails_outside_the_band() -> None:
    assert not claim_ssim_falls(_rows(kd_ssim=(0.89, 0.88, 0.87)), CFG).holds
    assert not claim_ssim_falls(_rows(kd_ssim=(0.3, 0.2, 0.1)), CFG).holds


def test_accuracy_claim_fails_for_a_large_cost() -> None:
    rows = [r for r in _rows() if not (isinstance(r, UtilityRow) and r.setting == "kd_k8")]
    rows.append(_u("kd_k8", "kd", 8, 0.80, 8))  # 10 points
    c = claim_accuracy_cost(rows, CFG)
    assert not c.holds and c.evidence["largest_cost_points"]["mnist"] == pytest.approx(10.0)
    clean = CFG.model_copy(update={"accuracy": "clean"})
    assert not claim_accuracy_cost(rows, clean).holds


def test_monotone_claims_fail_on_a_reversal() -> None:
    rows = _rows(kd_mse=(0.015, 0.014, 0.016))
    assert not claim_monotone_k(rows, CFG).holds
    rows = [r for r in _rows() if not (isinstance(r, AttackRow) and r.setting == "dp_s0.05")]
    rows.append(_a("dp_s0.05", "dp", 1, 0.05, 0.013, 0.95))
    assert not claim_monotone_sigma(rows, CFG).holds
    assert "not_tested" in claim_monotone_sigma(_rows()[:1], CFG).evidence


def test_k_anonymity_claim_fails_on_a_unique_row() -> None:
    rows = _rows() + [_u("mdav_k8", "mdav", 8, 0.8, 7)]
    c = claim_k_anonymous(rows, CFG)
    assert not c.holds and c.evidence["violations"] == {"mnist/mdav_k8": 7}


def test_config_refuses_bad_values() -> None:
    exp = get_experiment("split-learning-kdufsl")
    with pytest.raises(ConfigError, match="ks"):
        exp.make_config({"ks": []})
    with pytest.raises(ConfigError, match="datasets"):
        exp.make_config({"datasets": ["svhn"]})
    with pytest.raises(ConfigError, match="batch_size"):
        exp.make_config({"batch_size": 2})
    assert dataclasses.is_dataclass(AttackRow)


def test_experiment_runs_end_to_end_on_a_tiny_config() -> None:
    exp = get_experiment("split-learning-kdufsl")
    cfg = exp.make_config(
        {
            "datasets": ["digits"],
            "n_clients": 2,
            "per_client": 40,
            "n_aux": 60,
            "n_test": 40,
            "rounds": 1,
            "batch_size": 20,
            "sigmas": [0.1],
            "ks": [2],
            "attacks": ["split-whitebox"],
            "claim_attack": "split-whitebox",
            "whitebox_steps": 5,
            "max_rows": 20,
        }
    )
    res = exp.run(cfg)
    assert [c.text for c in res.claims] == [fn(_rows(), CFG).text for fn in CLAIMS]
    settings = {r["setting"] for r in res.tables["utility"]}
    assert settings == {"vanilla", "dp_s0.1", "mdav_k2", "kd_s0.05_k2"}
    k_claim = next(c for c in res.claims if "at least k times" in c.text)
    assert k_claim.holds and k_claim.evidence["checked"] == 2
    assert "reconstructions_digits" in res.images and "privacy_utility" in res.figures
    # standard and adaptive rows for every defended setting, standard only for vanilla
    assert len(res.tables["attacks"]) == 1 + 3 * 2
