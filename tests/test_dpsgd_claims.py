"""Seed 2 claims as pure functions of rows, each on rows where it must hold and where it must
fail; and the DP validity check, measured where the posterior concentrates, in seconds: it
holds for the real bound and refutes a bound 10x too large and a bound equal to the prior
variance (a bound that ignores the leakage)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch

from trainleak.attacks.informed import PosteriorMeanAttack
from trainleak.bounds.dpsgd import Schedule
from trainleak.bounds.published import leakage_success_bound
from trainleak.data import load_digits
from trainleak.experiments.dpsgd_bound_claims import (
    CLAIMS,
    BoundRow,
    binomial_lower,
    claim_feature_bound_valid,
    claim_hayes_success_valid,
    claim_headline_decreases,
    claim_headline_large_at_small_epsilon,
    claim_pool_bound_valid,
    claim_tighter_than_hayes_mse,
    claim_tighter_than_hayes_success,
    claim_tightness,
)
from trainleak.experiments.dpsgd_distortion_bound import (
    DPSGDBoundConfig,
    Setting,
    attack_target,
    measure,
)
from trainleak.models.registry import model_spec
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.training.dp import DPSGDConfig, train_dpsgd

PV = 0.07


def _errors(mean: float, n: int = 100, spread: float = 0.01) -> tuple[float, ...]:
    return tuple(mean + spread * np.sin(np.arange(n)))  # fixed, mean-centred wiggle


def _row(**kw: Any) -> BoundRow:
    base: dict[str, Any] = dict(
        regime="sweep", epsilon=1.0, sigma=2.0, sampling_rate=0.05, steps=200, pool_size=1000,
        leakage=0.1, leakage_capacity=1.0, leakage_chi2=0.2, leakage_kl_null=0.1,
        population_bound=0.04, population_psnr_ceiling=14.0, pool_bound=0.05,
        pool_bound_slb_part=0.0, pool_bound_dv_part=0.03, pool_bound_finite_pool_part=0.05,
        prior_variance=PV, guo_unbiased=4.0, hayes_mse=0.02, hayes_success=0.01,
        hayes_success_se=0.0005, leakage_success=0.005,
        posterior_mean=_errors(PV), identified=(False,) * 100, pool_mean=_errors(PV),
        population_posterior_mean=_errors(PV), public_mean=_errors(PV),
        feat_pool_bound=1.0, feat_prior_variance=3.0, feat_posterior_mean=_errors(3.0),
        feat_pool_mean=_errors(3.0),
    )  # fmt: skip
    base.update(kw)
    return BoundRow(**base)


def _concentrating(**kw: Any) -> BoundRow:
    base: dict[str, Any] = dict(
        regime="concentrating", pool_size=20, pool_bound=0.01, posterior_mean=_errors(0.04),
        identified=(True,) * 40 + (False,) * 60, hayes_success=0.6,
        pool_mean=_errors(PV, spread=0.02), feat_posterior_mean=_errors(1.5),
    )  # fmt: skip
    base.update(kw)
    return _row(**base)


def test_pool_validity_holds_where_it_can_bite_and_fails_above_the_attack() -> None:
    rows = [_row(), _concentrating()]
    res = claim_pool_bound_valid(rows, None)
    assert res.holds and res.evidence["informative"] and not res.evidence["violations"]
    wrong = [_row(), _concentrating(pool_bound=0.05)]  # above the attack's upper limit 0.042
    res = claim_pool_bound_valid(wrong, None)
    assert not res.holds and res.evidence["violations"][0][2] == "posterior_mean"


def test_pool_validity_is_not_tested_where_it_cannot_bite() -> None:
    res = claim_pool_bound_valid([_row()], None)  # attacks at the prior variance
    assert not res.holds and "not_tested" in res.evidence
    # targets that happen to sit near the mean (both errors below the prior variance) do not
    # make the check bite: the attack must beat the constant guess on the same targets
    easy = _row(posterior_mean=_errors(0.06), pool_mean=_errors(0.06))
    assert "not_tested" in claim_pool_bound_valid([easy], None).evidence
    # too few targets for an interval: unusable, whatever the mean says
    few = _row(posterior_mean=_errors(0.001, n=3), map=_errors(0.001, n=3))
    assert "not_tested" in claim_pool_bound_valid([few], None).evidence


def test_feature_validity_both_sides() -> None:
    assert claim_feature_bound_valid([_concentrating()], None).holds
    assert not claim_feature_bound_valid([_concentrating(feat_pool_bound=2.0)], None).holds
    no_features = _concentrating(feat_pool_bound=None, feat_prior_variance=None,
                                 feat_posterior_mean=(), feat_pool_mean=())  # fmt: skip
    assert "not_tested" in claim_feature_bound_valid([no_features], None).evidence


def test_hayes_validity_uses_an_exact_binomial_limit() -> None:
    assert claim_hayes_success_valid([_row(), _concentrating()], None).holds
    beaten = _concentrating(hayes_success=0.2)  # 40/100 identified: exact lower limit ~0.32
    res = claim_hayes_success_valid([beaten], None)
    assert not res.holds and res.evidence["violations"]
    assert "not_tested" in claim_hayes_success_valid([_row()], None).evidence
    # one success in six trials is no evidence against a bound of 0.0235 (Wilson says 0.038)
    assert binomial_lower(1, 6) == pytest.approx(1 - 0.95 ** (1 / 6))
    assert claim_hayes_success_valid(
        [_row(identified=(True,) + (False,) * 5, hayes_success=0.0235)], None
    ).holds


def test_headline_fraction_and_decrease_both_sides() -> None:
    rows = [_row(epsilon=e, population_bound=b) for e, b in ((2.0, 0.01), (1.0, 0.04))]
    assert claim_headline_large_at_small_epsilon(rows, None).holds  # sorted by epsilon
    assert claim_headline_decreases(rows, None).holds
    low = [_row(population_bound=0.02, pool_bound=0.06)]
    res = claim_headline_large_at_small_epsilon(low, None)
    assert not res.holds and res.evidence["pool_bound_fraction"] > 0.5
    flat_zero = [_row(epsilon=e, population_bound=0.0) for e in (1.0, 2.0, 4.0)]
    assert not claim_headline_decreases(flat_zero, None).holds
    assert not claim_headline_decreases(rows[:1], None).holds


def test_tightness_uses_the_upper_limit_of_the_best_population_attack() -> None:
    tight = _row(
        population_bound=0.036, public_mean=_errors(0.09), population_posterior_mean=_errors(0.07)
    )
    assert claim_tightness([tight], None).holds
    # the mean is within 2x, the upper limit is not: no claim of tightness
    noisy = _row(population_bound=0.035, population_posterior_mean=_errors(0.07, spread=0.05))
    res = claim_tightness([noisy], None)
    assert not res.holds and res.evidence["ratios"][0] > 2
    assert not claim_tightness([_row(epsilon=16.0)], None).holds  # nothing in [1, 8]
    few = _row(population_posterior_mean=_errors(0.05, n=4), public_mean=_errors(0.05, n=4))
    assert claim_tightness([few], None).evidence["ratios"] == [np.inf]  # no interval: no claim


def test_hayes_comparisons_both_sides() -> None:
    assert claim_tighter_than_hayes_mse([_row()], None).holds
    assert not claim_tighter_than_hayes_mse([_row(hayes_mse=0.06)], None).holds
    assert claim_tighter_than_hayes_success([_row()], None).holds
    assert not claim_tighter_than_hayes_success([_row(leakage_success=0.02)], None).holds


def test_every_claim_is_decided_on_one_row_set() -> None:
    rows = [_row(epsilon=1.0, population_bound=0.04), _row(epsilon=4.0, population_bound=0.01),
            _concentrating()]  # fmt: skip
    assert len([fn(rows, None) for fn in CLAIMS]) == 8


def test_leakage_success_bound_inverts_the_binary_kl() -> None:
    p = leakage_success_bound(0.5, 20).value
    k = 1 / 20
    kl = p * np.log(p / k) + (1 - p) * np.log((1 - p) / (1 - k))
    assert kl == pytest.approx(0.5, abs=1e-9) and p > k
    assert leakage_success_bound(0.1, 20).value < p


@pytest.fixture(scope="module")
def concentrating_row() -> BoundRow:
    """A real measurement: 60 targets from a 20-candidate pool, q = 0.5, T = 10, sigma = 1.2
    (about 2 s of CPU)."""
    torch.set_num_threads(1)
    ds = load_digits()
    others, pool = ds.subset(list(range(20))), ds.subset(list(range(100, 120)))
    population = ds.x[200:500]
    cfg = DPSGDBoundConfig(features=False, map_targets=0, hayes_samples=2000)
    setting = Setting("concentrating", 0.0, Schedule.constant(0.5, 1.2, 10))
    picks = torch.randint(0, 20, (60,), generator=torch.Generator().manual_seed(0)).tolist()
    targets = [(i, 1000 + k) for k, i in enumerate(picks)]
    return measure(cfg, setting, (others, pool, population), None, targets)


def test_validity_check_bites_and_holds_on_a_real_concentrating_measurement(
    concentrating_row: BoundRow,
) -> None:
    row = concentrating_row
    res = claim_pool_bound_valid([row], None)
    assert res.holds, res.evidence
    assert any(a == "posterior_mean" for _, _, a, _ in res.evidence["informative"])
    assert 0 < row.pool_bound < 0.5 * row.prior_variance
    assert claim_hayes_success_valid([row], None).holds


def test_validity_check_refutes_a_wrong_bound_on_the_same_measurement(
    concentrating_row: BoundRow,
) -> None:
    row = concentrating_row
    for wrong in (10 * row.pool_bound, row.prior_variance):
        res = claim_pool_bound_valid([dataclasses.replace(row, pool_bound=wrong)], None)
        assert not res.holds and res.evidence["violations"], wrong
    # a success bound at chance (no leakage) is refuted by the identification rate
    at_chance = dataclasses.replace(row, hayes_success=1 / 20, hayes_success_se=0.0)
    assert not claim_hayes_success_valid([at_chance], None).holds


def test_population_attack_is_the_posterior_mean_over_the_other_candidates() -> None:
    """The population-setting attack never sees the target: it equals the prior-aware attack
    run on the pool with the target removed (a public sample of the population)."""
    ds = load_digits()
    others, pool = ds.subset(list(range(30))), ds.subset(list(range(100, 120)))
    cfg = DPSGDBoundConfig(features=False, map_targets=0)
    setting = Setting("concentrating", 0.0, Schedule.constant(0.5, 1.5, 10))
    out = attack_target(cfg, setting, others, pool, 3, 7, None, False)
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[], out_dim=10)
    dcfg = DPSGDConfig(sampling_rate=0.5, noise_multiplier=1.5, steps=10, lr=cfg.lr, seed=7)
    release = train_dpsgd(spec, (others.x, others.y), (pool.x[3], pool.y[3]), dcfg)
    rest = pool.subset([i for i in range(20) if i != 3])
    know = Knowledge(input_shape=(1, 8, 8), value_range=(0.0, 1.0), prior=rest.x,
                     labels=rest.y, other_records=(others.x, others.y))  # fmt: skip
    rec = PosteriorMeanAttack()(release, know)
    err = float(((rec.inputs.double() - pool.x[3:4].double()) ** 2).mean())
    assert out["population_posterior_mean"] == pytest.approx(err, rel=1e-5)
    assert out["public_mean"] == pytest.approx(
        float(((rest.x.double().mean(0) - pool.x[3].double()) ** 2).mean()), rel=1e-9
    )
