"""Risk cards of the five experiments whose builders live in private modules (model inversion,
AT-AT, KD-UFSL split learning, transformer gradients, LM membership): for each, synthetic rows
that must come out ``high`` and rows that must not, and the counting rules (the SSIM count the
mean allows, the exact chance of membership at a fixed FPR) checked against real draws."""

from __future__ import annotations

import math

import pytest
import torch

from trainleak.experiments import (
    _inversion_risk,
    _lm_risk,
    _split_risk,
    _transformer_risk,
    atat_privacy,
    lm_membership,
    model_inversion_adaptive,
    split_learning_kdufsl,
    transformer_gradient_inversion,
)
from trainleak.experiments._lm_risk import chance_members
from trainleak.experiments._split_risk import guaranteed_count
from trainleak.experiments.lm_membership_claims import ComparisonRow, LMMembershipConfig, MethodRow
from trainleak.experiments.model_inversion_claims import (
    AtatPrivacyConfig,
    AttackRow,
    ModelInversionAdaptiveConfig,
    TargetRow,
)
from trainleak.experiments.split_learning_kdufsl_claims import AttackRow as SplitRow
from trainleak.experiments.split_learning_kdufsl_claims import (
    SplitLearningKDUFSLConfig,
    UtilityRow,
)
from trainleak.experiments.transformer_inversion_claims import Row as TRow
from trainleak.experiments.transformer_inversion_claims import TransformerInversionConfig
from trainleak.metrics.membership import tpr_at_fpr


def test_each_experiment_module_exposes_its_builder() -> None:
    assert model_inversion_adaptive.risk_of is _inversion_risk.risk_of
    assert atat_privacy.risk_of is _inversion_risk.risk_of
    assert split_learning_kdufsl.risk_of is _split_risk.risk_of
    assert transformer_gradient_inversion.risk_of is _transformer_risk.risk_of
    assert lm_membership.risk_of is _lm_risk.risk_of


# -- model-inversion-adaptive and atat-privacy --------------------------------------------------


def _inv(target: str, attack: str, acc1: float, evaluator: str = "standard") -> AttackRow:
    return AttackRow(target, target, attack, evaluator, acc1, acc1 - 0.1, acc1 + 0.1, 0.9, 80, 0.1)


def _target(name: str) -> TargetRow:
    return TargetRow(name, name, 0.95, 0.1, 0.02, 0.3, 0.5, 0.5)


def test_inversion_card_counts_identified_classes_beyond_the_prior_only_baseline() -> None:
    cfg = ModelInversionAdaptiveConfig()
    rows = [
        _target("standard"),
        _inv("standard", "standard", 0.5),
        _inv("standard", "adaptive", 0.75),
        _inv("standard", "adaptive", 0.4, "robust"),
        _inv("standard", "prior_only", 0.25),
        _inv("at", "adaptive", 0.3),
        _inv("at", "prior_only", 0.3),
    ]
    card = model_inversion_adaptive.risk_of(rows, cfg)
    assert card.level == "high" and card.attack is not None
    assert "the standard classifier" in card.release
    assert card.attack.attack == "adaptive generative inversion (standard evaluator)"
    assert (card.attack.recovered, card.attack.of, card.attack.baseline_recovered) == (60, 80, 20)
    assert card.attacks_run == 3 and card.bound is None


def test_inversion_card_at_the_baseline_is_not_high() -> None:
    cfg = ModelInversionAdaptiveConfig()
    tie = [_inv("at", "adaptive", 0.3), _inv("at", "prior_only", 0.3)]
    card = model_inversion_adaptive.risk_of(tie, cfg)
    assert card.level == "unproven" and card.attack is not None
    assert card.attack.recovered == card.attack.baseline_recovered == 24


def test_atat_card_uses_chance_where_no_prior_only_baseline_was_measured() -> None:
    cfg = AtatPrivacyConfig()
    at_chance = atat_privacy.risk_of([_target("atat-w1-e0.005"), _inv("atat-w1-e0.005",
                                      "standard", 0.1)], cfg)  # fmt: skip
    assert at_chance.level == "unproven" and at_chance.attack is not None
    assert at_chance.attack.baseline_recovered == 8  # 80 images / 10 classes
    assert "no prior-only baseline" in at_chance.attack.detail
    rows = [_inv("atat-w1-e0.005", "standard", 0.1), _inv("standard", "standard", 0.6)]
    card = atat_privacy.risk_of(rows, cfg)
    assert card.level == "high" and "the standard classifier" in card.release
    assert card.attack is not None and card.attack.recovered == 48


# -- split-learning-kdufsl ---------------------------------------------------------------------


def test_guaranteed_count_is_a_lower_bound_on_real_ssim_draws() -> None:
    gen = torch.Generator().manual_seed(0)
    positive = 0
    for _ in range(200):
        n = int(torch.randint(1, 40, (1,), generator=gen))
        s = torch.rand(n, generator=gen) ** float(torch.rand(1, generator=gen) * 3) * 2 - 1
        s = s.clamp(-1, 1)
        bound = guaranteed_count(float(s.mean()), n)
        assert bound <= int((s >= 0.5).sum())
        positive += bound > 0
    assert positive >= 20  # the draws reach the informative side too
    # tight when the images below the rule sit at it: 6 at SSIM 1 and 4 at 0.5
    assert guaranteed_count((6 + 4 * 0.5) / 10, 10) == 6
    assert guaranteed_count(0.5, 10) == 0 and guaranteed_count(float("nan"), 10) == 0


def _split(setting: str, ssim: float, base: float, attack: str = "split-fora") -> SplitRow:
    return SplitRow("mnist", setting, setting.split("_")[0], 1, 0.05, attack, False, 0.01,
                    ssim, 0.08, base, 100)  # fmt: skip


def _util(setting: str, eps: float) -> UtilityRow:
    return UtilityRow("mnist", setting, setting.split("_")[0], 1, 0.05, 0.9, 0.88, 1, eps)


def test_split_card_names_the_setting_inverted_beyond_the_auxiliary_mean() -> None:
    cfg = SplitLearningKDUFSLConfig()
    rows = [
        _util("vanilla", math.nan),
        _split("vanilla", 0.8, 0.2),
        _split("vanilla", 0.6, 0.2, "split-inverse-network"),
        _util("dp_0.1", 3.0),
        _split("dp_0.1", 0.3, 0.2),
    ]
    card = split_learning_kdufsl.risk_of(rows, cfg)
    assert card.level == "high" and "setting vanilla (the riskiest of 2" in card.release
    assert card.attack is not None and card.attack.attack == "split-fora"
    assert (card.attack.recovered, card.attack.baseline_recovered) == (60, 0)
    assert card.bound is None  # vanilla has no DP


def test_split_card_with_dp_epsilon_is_not_cleared_by_it() -> None:
    cfg = SplitLearningKDUFSLConfig()
    card = split_learning_kdufsl.risk_of([_util("dp_0.1", 3.0), _split("dp_0.1", 0.3, 0.2)], cfg)
    assert card.level == "unproven" and card.bound is not None  # epsilon does not clear
    assert card.bound.value == 3.0 and not card.bound.general and "epsilon" in card.bound.unit
    mean_like = split_learning_kdufsl.risk_of([_split("mdav_4", 0.7, 0.7)], cfg)
    assert mean_like.level == "unproven"  # no better than the auxiliary-mean image


# -- transformer-gradient-inversion ------------------------------------------------------------


def _tok(attack: str, exact: float, noise: float = 0.0, certified: int = 0) -> TRow:
    return TRow("encoder", "noise", 4, 12, 96, noise, 0.0, attack, exact, 0.9, 0.9, 0.8, 1.0,
                certified, 0.0)  # fmt: skip


def test_transformer_card_counts_exact_sequences_beyond_bag_of_words() -> None:
    cfg = TransformerInversionConfig()
    rows = [
        _tok("dager", 1.0, certified=4),
        _tok("tiger", 0.75),
        _tok("bag-of-words", 0.0),
        _tok("dager", 0.0, noise=0.01),
        _tok("bag-of-words", 0.0, noise=0.01),
    ]
    card = transformer_gradient_inversion.risk_of(rows, cfg)
    assert card.level == "high" and "noise 0 x RMS" in card.release
    assert card.attack is not None and card.attack.attack == "dager"
    assert (card.attack.recovered, card.attack.of, card.attack.baseline_recovered) == (4, 4, 0)
    assert card.attack.certified == 4


def test_transformer_card_without_exact_recovery_is_not_high() -> None:
    cfg = TransformerInversionConfig()
    rows = [_tok("dager", 0.0, 0.01), _tok("tiger", 0.0, 0.01), _tok("bag-of-words", 0.0, 0.01)]
    card = transformer_gradient_inversion.risk_of(rows, cfg)
    assert card.level == "unproven" and card.attack is not None
    assert card.attack.recovered == 0 and card.attack.baseline_recovered == 0
    lucky = transformer_gradient_inversion.risk_of(
        [_tok("tiger", 0.25), _tok("bag-of-words", 0.25)], cfg
    )
    assert lucky.level == "unproven"  # tied with the baseline


# -- lm-membership -----------------------------------------------------------------------------


def test_chance_members_matches_a_membership_blind_score() -> None:
    gen = torch.Generator().manual_seed(1)
    labels = torch.tensor([True] * 100 + [False] * 100)
    draws = [tpr_at_fpr(torch.rand(200, generator=gen), labels, 0.01) * 100 for _ in range(400)]
    assert chance_members(100, 100) == pytest.approx(200 / 101)
    assert sum(draws) / len(draws) == pytest.approx(chance_members(100, 100), abs=0.4)


def _method(name: str, tpr: float) -> MethodRow:
    return MethodRow(name, "rl" if name.startswith("adra") else "passive", 0.7, 0.6, 0.8, tpr,
                     tpr / 2, 0)  # fmt: skip


def test_lm_card_counts_members_at_one_percent_fpr_beyond_chance() -> None:
    cfg = LMMembershipConfig()
    rows = [_method("loss", 0.02), _method("adra-plus", 0.12), ComparisonRow("a", "b", 0, 0, 0)]
    card = lm_membership.risk_of(rows, cfg)
    assert card.level == "high" and card.attack is not None and "100 members" in card.release
    assert card.attack.attack.startswith("adra-plus")
    assert (card.attack.recovered, card.attack.of, card.attack.baseline_recovered) == (12, 100, 2)


def test_lm_card_at_chance_is_not_high() -> None:
    cfg = LMMembershipConfig()
    card = lm_membership.risk_of([_method("loss", 0.02), _method("adra", 0.01)], cfg)
    assert card.level == "unproven" and card.attack is not None
    assert card.attack.recovered == 2 and card.bound is None
    assert lm_membership.risk_of([], cfg).level == "unmeasured"
