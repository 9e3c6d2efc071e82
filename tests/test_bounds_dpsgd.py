"""The DP-SGD leakage and distortion bounds: oracles, validity of the parts, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from trainleak.bounds.dpsgd import (
    Schedule,
    dpsgd_distortion_bound,
    dpsgd_epsilon,
    kl_null_step,
    step_leakage,
)
from trainleak.bounds.entropy import (
    dv_table,
    entropy_lower_bound,
    finite_prior_bound,
    lattice_slb,
    make_blocks,
    pool_distances_sq,
)
from trainleak.data import load_digits
from trainleak.errors import ConfigError


@pytest.mark.parametrize("q", [0.001, 0.01, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0])
def test_kl_null_is_the_tightest_and_below_both_relaxations(q: float, sigma: float) -> None:
    kl = step_leakage(q, sigma, "kl_null")
    assert kl <= step_leakage(q, sigma, "chi2") + 1e-15
    assert kl <= step_leakage(q, sigma, "capacity") + 1e-15
    assert step_leakage(q, sigma, "best") == pytest.approx(kl)


def test_kl_null_matches_monte_carlo_and_closed_form_at_q_one() -> None:
    rng = np.random.default_rng(0)
    q, a = 0.1, 1.0 / 0.7
    x = np.where(rng.random(2_000_000) < q, a, 0.0) + rng.standard_normal(2_000_000)
    mc = np.log1p(q * np.expm1(a * x - a * a / 2)).mean()
    assert kl_null_step(q, 0.7) == pytest.approx(mc, rel=0.02)
    assert kl_null_step(1.0, 0.5) == pytest.approx(2.0)


def test_epsilon_matches_reference_values() -> None:
    # anchors/reference-bounds.md (Opacus 1.6 RDP accountant)
    assert dpsgd_epsilon(Schedule.constant(0.01, 0.5, 100), 1e-5) == pytest.approx(8.031, abs=2e-3)
    assert dpsgd_epsilon(Schedule.constant(0.01, 1.0, 1000), 1e-5) == pytest.approx(2.101, abs=2e-3)


@pytest.mark.parametrize(
    ("q", "sigma", "field"),
    [(0.0, 1.0, "sampling_rate"), (1.5, 1.0, "sampling_rate"), (0.1, 0.0, "noise_multiplier"),
     (0.1, -2.0, "noise_multiplier")],
)  # fmt: skip
def test_bad_schedule_names_the_field(q: float, sigma: float, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        Schedule.constant(q, sigma, 10)


def test_bad_representation_and_too_few_samples() -> None:
    x = load_digits().x
    sched = Schedule.constant(0.05, 1.0, 10)
    with pytest.raises(ConfigError, match="representation.*lpips"):
        dpsgd_distortion_bound(sched, x[:100], representation="lpips")
    with pytest.raises(ConfigError, match="samples.*at least"):
        dpsgd_distortion_bound(sched, x[:20], confidence=0.01)
    with pytest.raises(ConfigError, match="feature_map"):
        dpsgd_distortion_bound(sched, x[:100], representation="features")


def test_entropy_lower_bound_never_exceeds_the_true_entropy() -> None:
    rng = np.random.default_rng(1)
    p = np.array([0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05])
    h = float(-(p * np.log(p)).sum())
    for _ in range(30):
        codes = rng.choice(len(p), size=(400, 1), p=p)
        eb = entropy_lower_bound(codes, 0.05)
        assert eb.lower < h
        assert eb.plugin <= math.log(len(p)) + 1e-12
    assert h - eb.lower < 1.0  # and it is informative


def test_dv_bound_at_zero_leakage_is_close_to_but_below_the_variance() -> None:
    rng = np.random.default_rng(2)
    x = (rng.random((4000, 1)) < 0.5).astype(float)
    exact = dv_table(x, (0.0, 1.0), 0.05, exact=True).bound(0.0)[0]
    assert 0.2 < exact <= float(x.var()) + 1e-12
    sampled = dv_table(x, (0.0, 1.0), 0.05).bound(0.0)[0]
    assert 0.0 < sampled < exact
    assert dv_table(x, (0.0, 1.0), 0.05, exact=True).bound(math.log(2.0) + 0.01)[0] < 0.01


def test_lattice_slb_formula_and_blocks_partition() -> None:
    assert lattice_slb(0.0, 4, 0.1, 1.0) == 0.0
    k, step, h = 2, 1 / 16, 5.0
    want = k * step**2 * (math.exp(2 * h / k) / (2 * math.pi * math.e) - 1 / 12)
    assert lattice_slb(h, k, step, 0.0) == pytest.approx(want)
    blocks = make_blocks((1, 8, 8), "patches", 2)
    assert sorted(np.concatenate(blocks).tolist()) == list(range(64))
    with pytest.raises(ConfigError, match="patch"):
        make_blocks((1, 8, 8), "patches", 3)


def test_finite_pool_bound_is_below_the_prior_variance_and_vanishes_with_information() -> None:
    x = load_digits().x[:300].flatten(1).double().numpy()
    d2 = pool_distances_sq(x)
    var = float(x.var(axis=0).sum())
    assert 0 < finite_prior_bound(d2, 0.0) <= var
    assert finite_prior_bound(d2, math.log(300) + 1.0) == 0.0


def test_distortion_bound_decreases_with_epsilon_and_reports_components() -> None:
    x = load_digits().x[:600]
    values = []
    for sigma in (4.0, 1.0, 0.6):
        res = dpsgd_distortion_bound(Schedule.constant(0.05, sigma, 200), x, exact_prior=True)
        values.append(res.value)
        for key in ("leakage_capacity", "leakage_chi2", "leakage_kl_null", "epsilon", "slb_total",
                    "dv_total", "finite_pool", "psnr_ceiling", "frac_prior_variance"):  # fmt: skip
            assert key in res.components
    assert values[0] > values[1] > values[2] > 0
    assert values[0] < float(x.flatten(1).var(0).mean())
    sampled = dpsgd_distortion_bound(Schedule.constant(0.05, 4.0, 200), x, confidence=0.05)
    assert 0 < sampled.value < values[0]
    torch.testing.assert_close(torch.tensor(sampled.components["leakage"]),
                               torch.tensor(step_leakage(0.05, 4.0) * 200))  # fmt: skip
