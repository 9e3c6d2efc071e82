"""Confidence intervals for claims over seeds, trials and targets.

Claims that generalise over several seeds compare intervals, not means. Each function returns
plain floats so a claim can put them in its evidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from trainleak.errors import ConfigError


def _as_array(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise ConfigError.invalid(name, "at least one value", list(arr))
    if not np.all(np.isfinite(arr)):
        raise ConfigError.invalid(name, "finite values", arr.tolist())
    return arr


def mean_lower_bound(values: Sequence[float] | np.ndarray, level: float = 0.95) -> float:
    """One-sided Student-t lower confidence bound on the mean of ``values``.

    With a single value there is no spread estimate and the bound is ``-inf`` (nothing can be
    concluded from one seed). With zero spread the bound is the common value.
    """
    arr = _as_array(values, "values")
    n = arr.size
    if n == 1:
        return -math.inf
    sd = float(arr.std(ddof=1))
    if sd == 0.0:
        return float(arr.mean())
    return float(arr.mean() - stats.t.ppf(level, n - 1) * sd / math.sqrt(n))


def mean_upper_bound(values: Sequence[float] | np.ndarray, level: float = 0.95) -> float:
    """One-sided Student-t upper confidence bound on the mean (``+inf`` for one value)."""
    return -mean_lower_bound(-_as_array(values, "values"), level)


def difference_lower_bound(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    level: float = 0.95,
    *,
    paired: bool = True,
) -> float:
    """One-sided lower confidence bound on ``mean(a) - mean(b)``.

    Paired (same seeds on both sides): a t bound on the per-seed differences. Unpaired: Welch's
    t bound. A claim "a exceeds b" holds at ``level`` when this bound is above zero.
    """
    x = _as_array(a, "a")
    y = _as_array(b, "b")
    if paired:
        if x.size != y.size:
            raise ConfigError.invalid("b", f"{x.size} paired values", y.size)
        return mean_lower_bound(x - y, level)
    if x.size < 2 or y.size < 2:
        return -math.inf
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(vx + vy)
    diff = float(x.mean() - y.mean())
    if se == 0.0:
        return diff
    dof = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1))
    return float(diff - stats.t.ppf(level, dof) * se)


def wilson_interval(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided Wilson score interval for a binomial proportion."""
    if trials <= 0:
        raise ConfigError.invalid("trials", "a positive count", trials)
    if not 0 <= successes <= trials:
        raise ConfigError.invalid("successes", f"a count in [0, {trials}]", successes)
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == trials else min(1.0, centre + half)
    return lo, hi


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    level: float = 0.95,
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Two-sided percentile bootstrap interval for the mean of ``values``."""
    arr = _as_array(values, "values")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    means = arr[idx].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
