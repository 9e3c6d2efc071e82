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

from collections.abc import Mapping, Set
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


def heldout_candidates(public_x: Tensor, m: int, generator: torch.Generator) -> Tensor:
    """``m`` distinct held-out images drawn at random: the equal-budget "public data" baseline.

    With the same number of candidates as an attack and the same best-match selection, a set
    of real images the model never saw shows how much of a score comes from choosing the best
    of many plausible images rather than from the release.

    Args:
        public_x: ``(N, ...)`` held-out images (never the training set), ``N >= m``.
        m: number of candidates.
        generator: the source of randomness.

    Returns:
        ``(m, ...)`` candidates (copies).

    Raises:
        ConfigError: when fewer than ``m`` held-out images are given.
    """
    _check_m(m)
    if len(public_x) < m:
        raise ConfigError.invalid("m", f"at most {len(public_x)} held-out images", m)
    return public_x[torch.randperm(len(public_x), generator=generator)[:m]].clone()


def perturbed_mean_candidates(
    mean: Tensor,
    norms: Tensor,
    generator: torch.Generator,
    value_range: tuple[float, float] | None = None,
) -> Tensor:
    """The (public) mean image plus one random perturbation of each given norm.

    The equal-budget version of the mean-image baseline: as many candidates as the attack, each
    as far from the mean as the attack's matching candidate, in a uniformly random direction.
    Best-match selection over these measures what a cloud of noisy mean images achieves.

    Args:
        mean: ``(1, ...)``, one image as a batch of one (a public mean, never the training
            set's).
        norms: ``(m,)`` non-negative Euclidean norms of the perturbations, e.g. the norms of the
            attack's candidates minus the same mean.
        generator: the source of randomness.
        value_range: if given, candidates are clamped to it (as the attack's are); clamping
            can only shorten a perturbation.

    Returns:
        ``(m, ...)`` candidates.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> c = perturbed_mean_candidates(torch.zeros(1, 4, 4), torch.tensor([1.0, 2.0]), g)
        >>> [round(float(v), 4) for v in c.flatten(1).norm(dim=1)]
        [1.0, 2.0]
    """
    if norms.ndim != 1 or len(norms) == 0 or bool((norms < 0).any()):
        raise ConfigError.invalid("norms", "a non-empty (m,) tensor of non-negative norms", norms)
    if mean.ndim < 2 or mean.shape[0] != 1:
        raise ShapeError(f"mean must be one image as (1, ...), received {tuple(mean.shape)}")
    base = mean
    direction = torch.randn(len(norms), base[0].numel(), generator=generator, dtype=torch.float64)
    direction = direction / direction.norm(dim=1, keepdim=True).clamp_min(1e-300)
    out = base.double() + (direction * norms.double().view(-1, 1)).reshape(-1, *base.shape[1:])
    if value_range is not None:
        out = out.clamp(*value_range)
    return out.to(_float_dtype(mean))


def check_equal_budget(
    m: int, baselines: Mapping[str, Tensor], exempt: Set[str] = frozenset()
) -> None:
    """Raise unless every baseline not in ``exempt`` has exactly ``m`` candidates.

    Baselines compared with an attack must get the attack's budget; references that are not
    held to it (e.g. an oracle that knows the classes) are named in ``exempt``.

    Raises:
        ConfigError: naming the first baseline with a different number of candidates.
    """
    for name, cands in baselines.items():
        if name not in exempt and len(cands) != m:
            raise ConfigError.invalid(f"baselines[{name!r}]", f"{m} candidates", len(cands))


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
