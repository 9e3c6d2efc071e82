"""Intervals used by multi-seed claims."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainleak.errors import ConfigError
from trainleak.metrics.intervals import (
    bootstrap_interval,
    difference_lower_bound,
    mean_lower_bound,
    mean_upper_bound,
    wilson_interval,
)


def test_mean_bounds_bracket_mean_and_match_t_quantile() -> None:
    vals = [1.0, 2.0, 3.0, 4.0]
    lo, hi = mean_lower_bound(vals), mean_upper_bound(vals)
    assert lo < 2.5 < hi
    # t_{0.95, 3} = 2.353363; sd = 1.290994; se = 0.645497
    assert lo == pytest.approx(2.5 - 2.353363 * 0.645497, abs=1e-5)


def test_single_seed_concludes_nothing() -> None:
    assert mean_lower_bound([5.0]) == -math.inf
    assert difference_lower_bound([5.0], [1.0]) == -math.inf


def test_difference_needs_consistency_not_just_larger_mean() -> None:
    # Mean difference positive but spread larger than the mean: the claim must not hold.
    a = [10.0, 0.0, 0.0]
    b = [0.0, 1.0, 1.0]
    assert np.mean(a) > np.mean(b)
    assert difference_lower_bound(a, b) < 0
    # Consistent difference: the bound is positive.
    assert difference_lower_bound([3.0, 3.1, 2.9], [1.0, 1.1, 0.9]) > 1.5
    assert difference_lower_bound([3.0, 3.2, 2.9, 3.1], [1.0, 1.1], paired=False) > 1.0


def test_wilson_and_bootstrap() -> None:
    lo, hi = wilson_interval(0, 100)
    assert lo == 0.0 and 0.0 < hi < 0.05
    lo, hi = wilson_interval(50, 100)
    assert lo < 0.5 < hi
    blo, bhi = bootstrap_interval(np.arange(100.0))
    assert blo < 49.5 < bhi
    with pytest.raises(ConfigError):
        wilson_interval(3, 2)
    with pytest.raises(ConfigError):
        mean_lower_bound([])
