"""Reference bounds (Guo et al. 2022, Hayes et al. 2023) against independent values."""

from __future__ import annotations

import numpy as np
import pytest

from trainleak.bounds.dpsgd import Schedule
from trainleak.bounds.entropy import pool_distances_sq
from trainleak.bounds.published import HayesRero, guo_unbiased_bound, hayes_mse_bound
from trainleak.data import load_digits


@pytest.mark.parametrize(
    ("sigma", "steps", "want"), [(0.5, 100, 0.354), (0.8, 100, 6.51), (1.0, 1000, 1.33)]
)
def test_guo_matches_reference_table(sigma: float, steps: int, want: float) -> None:
    got = guo_unbiased_bound(Schedule.constant(0.01, sigma, steps)).value
    assert got == pytest.approx(want, rel=0.01)


def test_hayes_matches_reference_table() -> None:
    rero = HayesRero(Schedule.constant(0.01, 1.0, 100), samples=50_000)
    gamma, se = rero.success(np.array([0.5, 0.1, 0.01]))
    assert np.all(np.abs(gamma - np.array([0.550, 0.127, 0.015])) < 4 * se + 0.003)


def test_hayes_mse_bound_is_below_prior_variance() -> None:
    x = load_digits().x[:300].flatten(1).double().numpy()
    res = hayes_mse_bound(Schedule.constant(0.05, 2.0, 50), pool_distances_sq(x), samples=5000)
    assert 0 < res.value < float(x.var(0).sum())
