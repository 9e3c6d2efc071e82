"""Trivial baselines, scored by exactly the same code as the attack.

A count of training images above an SSIM threshold means nothing on its own: the plain
training-set mean image already passes SSIM 0.4 for about half of MNIST in Haim et al.'s
evaluation. Every reconstruction table therefore carries the strongest trivial baseline beside
the attack (see ``docs/calibration.md``), and :func:`compare_to_baselines` reports the margin.

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.rand(20, 1, 8, 8, generator=g)
    >>> rows = compare_to_baselines(
    ...     x, x.clone(), {"random": random_candidates((1, 8, 8), 20, g)}
    ... )
    >>> [row["method"] for row in rows], rows[0]["margin ssim>=0.4"]
    (['attack', 'random'], 20)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from trainleak.errors import ConfigError, ShapeError
from trainleak.metrics.matching import count_key, evaluate_reconstruction
from trainleak.validation import check_positive


def _check_m(m: int) -> None:
    if not isinstance(m, int) or m < 1:
        raise ConfigError.invalid("m", "a positive integer number of candidates", m)


def mean_image_candidates(train_or_prior_x: Tensor, m: int) -> Tensor:
    """``m`` copies of the mean image of ``train_or_prior_x``.

    Args:
        train_or_prior_x: ``(N, ...)`` images (the training set, or public data from the same
            distribution when the baseline should use only what an adversary could know).
        m: number of candidates.

    Returns:
        ``(m, ...)`` candidates.
    """
    _check_m(m)
    if len(train_or_prior_x) == 0:
        raise ShapeError("the mean image needs at least one image, received an empty tensor")
    mean = train_or_prior_x.double().mean(dim=0).to(_float_dtype(train_or_prior_x))
    return mean.unsqueeze(0).expand(m, *mean.shape).clone()


def class_mean_candidates(x: Tensor, y: Tensor, m: int) -> Tensor:
    """The per-class mean images, cycled to fill ``m`` candidates.

    Candidate ``i`` is the mean of class ``classes[i % k]`` (classes sorted), so every class
    gets ``m // k`` or ``m // k + 1`` candidates.

    Args:
        x: ``(N, ...)`` images.
        y: ``(N,)`` integer labels.
        m: number of candidates.

    Returns:
        ``(m, ...)`` candidates.
    """
    _check_m(m)
    if y.ndim != 1 or len(y) != len(x) or len(x) == 0:
        raise ShapeError(
            f"labels must be (N,) matching images (N, ...), received {tuple(y.shape)} and "
            f"{tuple(x.shape)}"
        )
    classes, inverse = torch.unique(y, sorted=True, return_inverse=True)
    xf = x.double().reshape(len(x), -1)
    sums = torch.zeros(len(classes), xf.shape[1], dtype=torch.float64).index_add_(0, inverse, xf)
    means = sums / torch.bincount(inverse, minlength=len(classes)).unsqueeze(1)
    means = means.reshape(len(classes), *x.shape[1:]).to(_float_dtype(x))
    return means[torch.arange(m) % len(classes)]


def random_candidates(
    shape: tuple[int, ...],
    m: int,
    generator: torch.Generator,
    value_range: tuple[float, float] = (0.0, 1.0),
) -> Tensor:
    """``m`` images of i.i.d. uniform noise in ``value_range``.

    Args:
        shape: the shape of one image.
        m: number of candidates.
        generator: the source of randomness (nothing global is used).
        value_range: ``(low, high)``.

    Returns:
        ``(m, *shape)`` float32 candidates.
    """
    _check_m(m)
    low, high = value_range
    check_positive("value_range width", high - low)
    return low + (high - low) * torch.rand(m, *shape, generator=generator)


def compare_to_baselines(
    train_x: Tensor,
    attack_candidates: Tensor,
    baselines: Mapping[str, Tensor],
    *,
    attack_name: str = "attack",
    **eval_kw: Any,
) -> list[dict[str, Any]]:
    """Score the attack and every baseline with :func:`evaluate_reconstruction`.

    Args:
        train_x: ``(n, ...)`` ground truth.
        attack_candidates: ``(m, ...)`` the attack's reconstructions.
        baselines: name -> candidates, e.g. from the functions in this module.
        attack_name: the attack row's ``method``.
        **eval_kw: passed to :func:`evaluate_reconstruction` for every method alike.

    Returns:
        One row per method, the attack first. Every row has the same keys; the attack's row
        gives ``best_baseline`` (the baseline with the highest count at the first threshold,
        ties broken by median SSIM) and ``margin ssim>=t``: the attack's count minus the best
        baseline's count at each threshold ``t``. Baseline rows have ``None`` there.
    """
    if not baselines:
        raise ConfigError.invalid("baselines", "at least one baseline", dict(baselines))
    thresholds = tuple(eval_kw.get("thresholds", (0.4, 0.6)))
    attack = evaluate_reconstruction(train_x, attack_candidates, **eval_kw).to_row(attack_name)
    rows = [evaluate_reconstruction(train_x, c, **eval_kw).to_row(n) for n, c in baselines.items()]
    first = count_key(thresholds[0]) if thresholds else "median_ssim"
    best = max(rows, key=lambda r: (r[first], r["median_ssim"]))
    attack["best_baseline"] = best["method"]
    for row in rows:
        row["best_baseline"] = None
    for t in thresholds:
        key = count_key(t)
        attack[f"margin {key}"] = attack[key] - best[key]
        for row in rows:
            row[f"margin {key}"] = None
    return [attack, *rows]


def _float_dtype(x: Tensor) -> torch.dtype:
    return x.dtype if x.is_floating_point() else torch.float32
