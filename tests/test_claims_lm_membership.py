"""The claims of ``lm-membership`` on synthetic rows: each can hold and can fail."""

from __future__ import annotations

import pytest

from language_fixtures import toy_language_release
from trainleak.experiments.lm_membership import (
    comparison_rows,
    examples,
    method_rows,
    step_rows,
)
from trainleak.experiments.lm_membership_claims import (
    CLAIMS,
    ComparisonRow,
    LMMembershipConfig,
    MethodRow,
    claim_adra_beats_n_sampling,
    claim_adra_plus_at_least_adra,
    claim_adra_plus_beats_minkpp,
    claim_target_is_informative,
)
from trainleak.scenarios.language import run_lm_membership
from trainleak.systems.language import MembershipSplit, TargetSettings

CFG = LMMembershipConfig()


def cmp(a: str, b: str, diff: float, lo: float, hi: float) -> ComparisonRow:
    return ComparisonRow(a, b, diff, lo, hi)


def test_adra_beats_n_sampling_both_sides():
    assert claim_adra_beats_n_sampling([cmp("adra", "n-sampling", 0.1, 0.03, 0.17)], CFG).holds
    c = claim_adra_beats_n_sampling([cmp("adra", "n-sampling", 0.05, -0.01, 0.11)], CFG)
    assert not c.holds and c.evidence["diff_lo"] == -0.01
    assert not claim_adra_beats_n_sampling([], CFG).holds


def test_adra_plus_at_least_adra_both_sides():
    assert claim_adra_plus_at_least_adra([cmp("adra-plus", "adra", -0.02, -0.08, 0.04)], CFG).holds
    assert not claim_adra_plus_at_least_adra(
        [cmp("adra-plus", "adra", -0.1, -0.16, -0.04)], CFG
    ).holds


def test_adra_plus_beats_minkpp_both_sides():
    key = f"minkpp@{CFG.minkpp_k:g}"
    assert claim_adra_plus_beats_minkpp([cmp("adra-plus", key, 0.08, 0.02, 0.14)], CFG).holds
    # significant but below the margin, and above the margin but not significant: both fail
    assert not claim_adra_plus_beats_minkpp([cmp("adra-plus", key, 0.03, 0.01, 0.05)], CFG).holds
    assert not claim_adra_plus_beats_minkpp([cmp("adra-plus", key, 0.06, -0.01, 0.13)], CFG).holds


def _loss_row(lo: float, hi: float) -> MethodRow:
    return MethodRow("loss", "passive", (lo + hi) / 2, lo, hi, 0.0, 0.0, 0)


def test_target_is_informative_both_sides():
    assert claim_target_is_informative([_loss_row(0.6, 0.75)], CFG).holds
    assert not claim_target_is_informative([_loss_row(0.45, 0.6)], CFG).holds
    assert not claim_target_is_informative([_loss_row(0.98, 1.0)], CFG).holds


def test_rows_and_claims_from_a_toy_run():
    release, texts, labels = toy_language_release()
    half = len(texts) - 4
    split = MembershipSplit(texts[:half], labels[:half], texts[half:], labels[half:])
    params = {
        "steps": 2,
        "prompts_per_step": 4,
        "group": 4,
        "n_samples": 4,
        "max_new_tokens": 8,
        "eval_every": 1,
        "max_length": 32,
    }
    out = run_lm_membership(TargetSettings(), params, release=(release, split))
    cfg = LMMembershipConfig(n_boot=100)
    rows = [*method_rows(out, cfg), *comparison_rows(out, cfg), *step_rows(out)]
    methods = {r.method for r in rows if isinstance(r, MethodRow)}
    assert {"loss", "zlib", "reference", "minkpp@0.2", "n-sampling", "adra", "adra-plus"} <= methods
    assert len([r for r in rows if isinstance(r, ComparisonRow)]) == 4
    assert len(step_rows(out)) == 2 * 3
    claims = [fn(rows, cfg) for fn in CLAIMS]
    assert len(claims) == 4 and all(c.evidence for c in claims)
    ex = examples(out)
    assert {e["member"] for e in ex} == {True, False} and "adra-plus" in ex[0]


@pytest.mark.slow
def test_lm_membership_default_run():
    from trainleak.experiments import available_experiments

    exp = available_experiments()["lm-membership"]
    res = exp.run(exp.make_config({}))
    assert len(res.claims) == 4 and "rl_steps" in res.tables


def test_lm_membership_config_refuses_bad_values():
    from trainleak.errors import ConfigError
    from trainleak.experiments import available_experiments

    exp = available_experiments()["lm-membership"]
    for bad in ({"n_members": 1}, {"rl_steps": 0}, {"minkpp_k": 0.0}, {"unknown": 1}):
        with pytest.raises(ConfigError):
            exp.make_config(bad)


def test_risk_card_counts_members_flagged_beyond_chance():
    from trainleak.experiments.lm_membership import risk_of

    strong = MethodRow("reference", "passive", 0.99, 0.98, 1.0, 0.87, 0.79, 0)
    chance = MethodRow("n-sampling", "sampling", 0.5, 0.42, 0.57, 0.01, 0.0, 0)
    card = risk_of([strong, chance], CFG)
    assert card.attack is not None and card.attack.recovered == 87
    # exact chance at 1% FPR over 100 non-members: 2 * 100 / 101 members, rounded up
    assert card.attack.baseline_recovered == 2 and card.attacks_run == 2
    weak = risk_of([chance], CFG)
    assert weak.attack is not None and weak.attack.beyond_baseline == -1
    assert weak.level != card.level
