"""The claims of ``split-llm-mixguard`` on synthetic rows, on both sides."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import require_module

require_module("transformers", "pip install 'trainleak[text]'")

from trainleak.experiments.split_llm_mixguard import run  # noqa: E402
from trainleak.experiments.split_llm_mixguard_claims import (  # noqa: E402
    AttackRow,
    Row,
    SplitLLMMixGuardConfig,
    UtilityRow,
    claim_attack_is_real,
    claim_noise_costs_more,
    claim_protects_better,
    claim_protects_better_adaptive,
    claim_server_gain_kept,
    claim_slots_near_chance,
    claim_utility,
    noise_to_match,
)

CFG = SplitLLMMixGuardConfig()
ATT = ("split-lm-inverter", "split-lm-adaptive-inverter", "split-lm-bisr")


def _attack(
    setting: str, kind: str, sigma: float, tok: float, slot: float, attack: str
) -> AttackRow:
    return AttackRow(setting, kind, sigma, attack, tok, slot, tok, 0.3, 0.0, 0.35, 0.01)


def _rows(
    acc_mg: float = 0.75,
    tok_mg: float = 0.05,
    slot_mg: float = 0.01,
    tok_none: float = 0.95,
    noise: dict[float, tuple[float, float]] | None = None,
) -> list[Row]:
    noise = noise if noise is not None else {1.0: (0.76, 0.4), 4.0: (0.5, 0.04)}
    rows: list[Row] = [
        UtilityRow("non-split", "nonsplit", 0.0, 0.76, float("nan")),
        UtilityRow("none", "none", 0.0, 0.76, float("nan")),
        UtilityRow("mixup", "mixup", 0.0, 0.77, float("nan")),
        UtilityRow("mixguard", "mixguard", 0.0, acc_mg, 0.2),
    ]
    for a in ATT:
        rows.append(_attack("none", "none", 0.0, tok_none, 0.8, a))
        rows.append(_attack("mixup", "mixup", 0.0, 0.6, 0.05, a))
        rows.append(_attack("mixguard", "mixguard", 0.0, tok_mg, slot_mg, a))
    for s, (acc, tok) in noise.items():
        rows.append(UtilityRow(f"noise-{s:g}", "noise", s, acc, float("nan")))
        rows += [_attack(f"noise-{s:g}", "noise", s, tok, 0.01, a) for a in ATT]
    return rows


def test_attack_is_real_both_sides() -> None:
    assert claim_attack_is_real(_rows(), CFG).holds
    assert not claim_attack_is_real(_rows(tok_none=0.8), CFG).holds
    assert not claim_attack_is_real([r for r in _rows() if r.setting != "none"], CFG).holds


def test_utility_both_sides() -> None:
    assert claim_utility(_rows(acc_mg=0.74), CFG).holds
    out = claim_utility(_rows(acc_mg=0.70), CFG)
    assert not out.holds and out.evidence["gap_points"] == pytest.approx(6.0)
    # the client-only reference is reported beside the claim, never changes its verdict
    rows = [*_rows(acc_mg=0.74), UtilityRow("client-only", "clientonly", 0.0, 0.75, float("nan"))]
    out = claim_utility(rows, CFG)
    assert out.holds and out.evidence["over_client_only_points"] == pytest.approx(-1.0)
    assert claim_protects_better(rows, CFG).evidence == claim_protects_better(_rows(), CFG).evidence


def test_server_gain_kept_both_sides() -> None:
    def rows(mg: float, alone: float, nonsplit: float = 0.76) -> list[Row]:
        out = [r for r in _rows(acc_mg=mg) if r.setting != "non-split"]
        return [
            *out,
            UtilityRow("non-split", "nonsplit", 0.0, nonsplit, float("nan")),
            UtilityRow("client-only", "clientonly", 0.0, alone, float("nan")),
        ]

    # the server adds 16 points; MIXGUARD keeps 10 of them (holds) or 4 (fails)
    held = claim_server_gain_kept(rows(0.70, 0.60), CFG)
    assert held.holds and held.evidence["kept_points"] == pytest.approx(10.0)
    assert not claim_server_gain_kept(rows(0.64, 0.60), CFG).holds
    # the client alone solves the task: not tested, reported as not holding, with the reason
    alone = claim_server_gain_kept(rows(0.76, 0.75), CFG)
    assert not alone.holds and "does not need the server" in str(alone.evidence)
    assert not claim_server_gain_kept(_rows(), CFG).holds  # no client-only row


def test_slots_near_chance_both_sides() -> None:
    assert claim_slots_near_chance(_rows(slot_mg=0.02), CFG).holds
    assert not claim_slots_near_chance(_rows(slot_mg=0.03), CFG).holds


def test_protects_better_both_sides() -> None:
    assert claim_protects_better(_rows(), CFG).holds
    assert claim_protects_better_adaptive(_rows(), CFG).holds
    # a noise level with MIXGUARD's accuracy and lower recovery defeats the claim
    rows = _rows(noise={1.0: (0.76, 0.04)})
    assert not claim_protects_better(rows, CFG).holds
    rows = [
        dataclasses.replace(r, token_recovery=0.9)
        if isinstance(r, AttackRow) and r.setting == "mixguard" and "adaptive" in r.attack
        else r
        for r in _rows()
    ]
    assert claim_protects_better(_rows(), CFG).holds
    assert not claim_protects_better_adaptive(rows, CFG).holds
    # no rival at MIXGUARD's accuracy: not tested, reported as not holding
    alone = _rows(acc_mg=0.9)
    assert "not_tested" in claim_protects_better(alone, CFG).evidence


def test_noise_costs_more_both_sides() -> None:
    rows = _rows()
    assert noise_to_match(rows) == (4.0, 0.5)
    assert claim_noise_costs_more(rows, CFG).holds
    cheap = _rows(noise={1.0: (0.8, 0.05)})
    assert noise_to_match(cheap) == (1.0, 0.8)
    assert not claim_noise_costs_more(cheap, CFG).holds
    never = _rows(noise={1.0: (0.76, 0.5)})
    out = claim_noise_costs_more(never, CFG)
    assert noise_to_match(never) is None and out.holds and out.evidence["matched"] is False


@pytest.mark.slow
def test_experiment_runs_end_to_end_on_a_tiny_config() -> None:
    cfg = SplitLLMMixGuardConfig(
        n_private=96,
        n_test=48,
        n_public_records=160,
        n_wiki=0,
        pool_size=8,
        length=20,
        n_layer=3,
        n_embd=32,
        pretrain_steps=30,
        bottom_end=1,
        top_start=2,
        steps=10,
        batch_size=8,
        record_rows=32,
        sigmas=[1.0],
        calib_steps=10,
        inverter_steps=40,
        bisr_top_k=4,
    )
    res = run(cfg)
    assert len(res.claims) == 7 and "privacy_utility" in res.figures
    settings = {r["setting"] for r in res.tables["utility"]}
    assert settings == {"non-split", "client-only", "none", "noise-1", "mixup", "mixguard"}
    assert len(res.tables["attacks"]) == 2 + 3 * 3  # no adaptive row without a defense
