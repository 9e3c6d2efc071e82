"""Confidence intervals for claims over seeds, trials and targets.

Claims that generalise over several seeds compare intervals, not means. Each function returns
plain floats so a claim can put them in its evidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from trainleak.errors import ConfigError, ShapeError


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


def _group_sums(
    values: np.ndarray, groups: np.ndarray, keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    sums = np.array([values[groups == k].sum() for k in keys], dtype=float)
    counts = np.array([(groups == k).sum() for k in keys], dtype=float)
    return sums, counts


def class_bootstrap_interval(
    hits: Sequence[float] | np.ndarray,
    groups: Sequence[int] | np.ndarray,
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``hits`` resampling whole ``groups``
    (classes) with replacement: the cluster bootstrap, for outcomes that are correlated within a
    group, such as an inversion attack's near-identical images of one class (Davison and
    Hinkley, "Bootstrap Methods and their Application", 1997, section 3.8).

    Raises:
        ShapeError: ``hits`` and ``groups`` of different lengths, or empty.
    """
    h, g = np.asarray(hits, dtype=float), np.asarray(groups)
    if len(h) != len(g) or not len(h):
        raise ShapeError(f"{len(h)} outcomes for {len(g)} group labels (need >= 1)")
    keys = np.unique(g)
    sums, counts = _group_sums(h, g, keys)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(keys), size=(n_boot, len(keys)))
    means = sums[pick].sum(1) / counts[pick].sum(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def paired_class_difference_interval(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    groups: Sequence[int] | np.ndarray,
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``mean(a) - mean(b)`` and its cluster-bootstrap interval when ``a`` and ``b`` are two
    outcomes of the same items (two evaluators scoring the same images), ``groups`` their
    clusters (the images' target classes): each resample draws whole groups with replacement
    and takes both outcomes of their items, so the pairing is kept and the items of one group
    count as one piece of evidence (the paired form of :func:`class_bootstrap_interval`).
    Where the two outcomes agree on most items, the difference's interval is far narrower than
    the two marginal intervals, whose overlap says little about a difference.

    Raises:
        ShapeError: ``a``, ``b`` and ``groups`` of different lengths, or empty.
    """
    x, y, g = np.asarray(a, dtype=float), np.asarray(b, dtype=float), np.asarray(groups)
    if not (len(x) == len(y) == len(g)) or not len(x):
        raise ShapeError(
            f"paired outcomes of lengths {len(x)} and {len(y)} for {len(g)} group labels "
            "(need equal lengths, >= 1)"
        )
    # the cluster bootstrap of the per-item differences: one resample of groups for both
    lo, hi = class_bootstrap_interval(x - y, g, level=level, n_boot=n_boot, seed=seed)
    return float(x.mean() - y.mean()), lo, hi


def paired_class_ratio_interval(
    num: Sequence[float] | np.ndarray,
    num_groups: Sequence[int] | np.ndarray,
    den: Sequence[float] | np.ndarray,
    den_groups: Sequence[int] | np.ndarray,
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``mean(num) / mean(den)`` and its cluster-bootstrap interval when both samples score
    the same classes (two attacks on one target): each resample draws classes with replacement
    and takes both samples' outcomes of those classes, so the pairing by class is kept and
    outcomes within a class count once. A zero denominator gives ``inf``.

    Raises:
        ShapeError: a sample and its groups of different lengths, or an empty sample.
    """
    a, ga = np.asarray(num, dtype=float), np.asarray(num_groups)
    b, gb = np.asarray(den, dtype=float), np.asarray(den_groups)
    if len(a) != len(ga) or len(b) != len(gb) or not len(a) or not len(b):
        raise ShapeError(
            f"ratio samples of {len(a)} and {len(b)} outcomes for {len(ga)} and {len(gb)} "
            "group labels (need equal lengths, >= 1)"
        )
    keys = np.union1d(ga, gb)
    sa, ca = _group_sums(a, ga, keys)
    sb, cb = _group_sums(b, gb, keys)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(keys), size=(n_boot, len(keys)))
    with np.errstate(divide="ignore", invalid="ignore"):
        ma = sa[pick].sum(1) / ca[pick].sum(1)
        mb = sb[pick].sum(1) / cb[pick].sum(1)
        r = np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0), np.inf)
    r = np.where(np.isnan(r), np.inf, r)  # a resample without any denominator outcome
    point = a.mean() / b.mean() if b.mean() > 0 else math.inf
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(point), float(lo), float(hi)


def _cell_sums(
    values: np.ndarray, classes: np.ndarray, replicates: np.ndarray, ck: np.ndarray, rk: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sum and count of ``values`` in every (replicate, class) cell, shape (R, C)."""
    ri = np.searchsorted(rk, replicates)
    ci = np.searchsorted(ck, classes)
    sums = np.zeros((len(rk), len(ck)))
    counts = np.zeros((len(rk), len(ck)))
    np.add.at(sums, (ri, ci), values)
    np.add.at(counts, (ri, ci), 1.0)
    return sums, counts


def _crossed_weights(
    n_rep: int, n_cls: int, resample_replicates: bool, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """How often each replicate and each class is drawn in every resample, (B, R) and (B, C)."""
    rng = np.random.default_rng(seed)
    cls = rng.integers(0, n_cls, size=(n_boot, n_cls))
    wc = np.stack([np.bincount(row, minlength=n_cls) for row in cls]).astype(float)
    if not resample_replicates:
        return np.ones((n_boot, n_rep)), wc
    rep = rng.integers(0, n_rep, size=(n_boot, n_rep))
    wr = np.stack([np.bincount(row, minlength=n_rep) for row in rep]).astype(float)
    return wr, wc


def _checked(
    hits: Sequence[float] | np.ndarray,
    classes: Sequence[float] | np.ndarray,
    replicates: Sequence[float] | np.ndarray,
    name: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h, c, r = np.asarray(hits, dtype=float), np.asarray(classes), np.asarray(replicates)
    if not (len(h) == len(c) == len(r)) or not len(h):
        raise ShapeError(
            f"{name}: {len(h)} outcomes for {len(c)} class and {len(r)} replicate labels "
            "(need equal lengths, >= 1)"
        )
    return h, c, r


def crossed_class_interval(
    hits: Sequence[float] | np.ndarray,
    classes: Sequence[float] | np.ndarray,
    replicates: Sequence[float] | np.ndarray,
    *,
    resample_replicates: bool = True,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``hits`` when the outcomes are crossed
    by class and replicate (the same classes attacked on targets trained at several seeds):
    each resample draws the classes and, independently, the replicates with replacement and
    takes every outcome of the drawn (replicate, class) cells, weighted by how often both were
    drawn. This is the pigeonhole bootstrap for crossed random effects (Owen, "The pigeonhole
    bootstrap", Annals of Applied Statistics 1(2), 2007; McCullagh, Bernoulli 6(2), 2000):
    an identity that is hard to invert on one target is hard on the others, so neither
    classes within seeds nor (seed, class) cells are independent units. It is conservative
    (Owen: it over-counts the interaction variance). ``resample_replicates=False`` draws the
    classes only, each with all its replicates (the replicates held fixed).

    Raises:
        ShapeError: ``hits``, ``classes`` and ``replicates`` of different lengths, or empty.
    """
    h, c, r = _checked(hits, classes, replicates, "hits")
    ck, rk = np.unique(c), np.unique(r)
    s, n = _cell_sums(h, c, r, ck, rk)
    wr, wc = _crossed_weights(len(rk), len(ck), resample_replicates, n_boot, seed)
    means = np.einsum("br,rc,bc->b", wr, s, wc) / np.einsum("br,rc,bc->b", wr, n, wc)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def paired_crossed_ratio_interval(
    num: tuple[
        Sequence[float] | np.ndarray, Sequence[int] | np.ndarray, Sequence[int] | np.ndarray
    ],
    den: tuple[
        Sequence[float] | np.ndarray, Sequence[int] | np.ndarray, Sequence[int] | np.ndarray
    ],
    *,
    resample_replicates: bool = True,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``mean(num) / mean(den)`` and its crossed-bootstrap interval (see
    :func:`crossed_class_interval`) when both samples score the same classes on the same
    replicates (two attacks on each replicate target): each resample draws one set of classes
    and one set of replicates and takes both samples' outcomes of those cells, keeping the
    pairing. ``num`` and ``den`` are each ``(hits, classes, replicates)``. A zero denominator
    gives ``inf``.

    Raises:
        ShapeError: a sample with labels of other lengths, or an empty sample.
    """
    a, ca, ra = _checked(*num, "num")
    b, cb, rb = _checked(*den, "den")
    ck, rk = np.union1d(ca, cb), np.union1d(ra, rb)
    sa, na = _cell_sums(a, ca, ra, ck, rk)
    sb, nb = _cell_sums(b, cb, rb, ck, rk)
    wr, wc = _crossed_weights(len(rk), len(ck), resample_replicates, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ma = np.einsum("br,rc,bc->b", wr, sa, wc) / np.einsum("br,rc,bc->b", wr, na, wc)
        mb = np.einsum("br,rc,bc->b", wr, sb, wc) / np.einsum("br,rc,bc->b", wr, nb, wc)
        ratio = np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0), np.inf)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    point = a.mean() / b.mean() if b.mean() > 0 else math.inf
    lo, hi = np.quantile(ratio, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(point), float(lo), float(hi)
