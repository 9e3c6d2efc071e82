"""Intervals used by multi-seed claims."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from trainleak.errors import ConfigError, ShapeError
from trainleak.metrics.intervals import (
    bootstrap_interval,
    difference_lower_bound,
    mean_lower_bound,
    mean_upper_bound,
    paired_class_ratio_interval,
    wilson_interval,
)
from trainleak.metrics.inversion import attack_accuracy, ratio_interval


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


def test_paired_class_ratio_keeps_the_pairing_and_counts_classes_once() -> None:
    groups = np.repeat(np.arange(20), 8)  # 20 classes, 8 near-copies each
    den = np.isin(groups, np.arange(10)).astype(float)  # the standard attack: classes 0-9
    num = np.isin(groups, np.arange(15)).astype(float)  # the adaptive one: classes 0-14
    f, lo, hi = paired_class_ratio_interval(num, groups, den, groups)
    assert f == pytest.approx(1.5)
    assert lo <= 1.5 <= hi
    # images resampled independently: the classes' copies pass for evidence, far too narrow
    _, lo_i, hi_i = ratio_interval(num, den)
    assert (hi - lo) > 1.3 * (hi_i - lo_i)
    # the same outcomes on both sides: every paired resample gives exactly 1, while the
    # unpaired image bootstrap spreads around it
    f1, lo1, hi1 = paired_class_ratio_interval(den, groups, den, groups)
    assert (f1, lo1, hi1) == (1.0, 1.0, 1.0)
    _, lo_u, hi_u = ratio_interval(den, den)
    assert hi_u - lo_u > 0.3
    with pytest.raises(ShapeError):
        paired_class_ratio_interval(num, groups[:5], den, groups)


def test_class_interval_reaches_the_attack_accuracy() -> None:
    # an evaluator that returns the input as logits: 4 classes x 6 copies, two classes hit
    labels = torch.arange(4).repeat_interleave(6)
    pred = torch.where(labels < 2, labels, (labels + 1) % 4)
    images = torch.nn.functional.one_hot(pred, 4).double()
    acc = attack_accuracy(torch.nn.Identity(), images, labels, 4)
    assert acc.acc1 == 0.5
    lo, hi = acc.acc1_interval
    # resampling 4 classes: an all-miss or all-hit resample has chance 2 * (1/2)^4 = 1/8,
    # so the 95 % interval reaches both ends; the image bootstrap of 24 outcomes would not
    assert (lo, hi) == (0.0, 1.0)
