"""Is a reconstruction of *this* training image, or only of its class?

A high SSIM with a training image does not show that a candidate carries information about
that particular sample: a class-typical image (a class mean, any other digit of the class) can
match it just as well. The train/held-out distance ratio tests this directly. For training
image ``x_i`` with matched candidate ``c``::

    ratio_i = d(c, x_i) / min_{h in held-out, class(h) = class(x_i)} d(c, h)

and the reconstruction is *specific* when ``ratio_i < threshold`` (default 1): the candidate is
closer to its own training image than to every held-out image of the same class. The held-out
images must be data the model never saw, and (to be fair to baselines built from held-out
data) disjoint from any baseline's candidates.

Distances are Euclidean between standardised images (each image centred and scaled to unit
norm), the geometry of the normalised cross-correlation used to match candidates, so a
candidate's arbitrary scale and offset do not matter: ``d^2 = 2 (1 - NCC)``.

References:
    Carlini, Hayes, Nasr, Jagielski, Sehwag, Tramer, Balle, Ippolito, Wallace, "Extracting
    Training Data from Diffusion Models", USENIX Security 2023 (a generation counts as
    memorised when it is much closer to one training image than to the rest of the data: a
    distance ratio to neighbours). Haim, Vardi, Yehudai, Shamir, Irani, "Reconstructing
    Training Data from Trained Neural Networks", NeurIPS 2022 (reconstructions shown beside
    their nearest training and test images).

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> train, held = torch.rand(4, 1, 6, 6, generator=g), torch.rand(30, 1, 6, 6, generator=g)
    >>> classes, held_classes = torch.zeros(4, dtype=torch.long), torch.zeros(30, dtype=torch.long)
    >>> s = specificity(train, classes, train.clone(), held, held_classes)
    >>> s.count, s.rate
    (4, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from trainleak.errors import ConfigError, ShapeError


@dataclass(frozen=True)
class SpecificityScores:
    """Per-training-image distance ratios and the resulting specificity.

    Attributes:
        ratio: ``(n,)`` distance to the own training image over the distance to the nearest
            held-out image of the same class (``inf`` when that distance is 0).
        specific: ``(n,)`` bool, ``ratio < threshold``.
        threshold: the ratio below which a reconstruction counts.
    """

    ratio: Tensor
    specific: Tensor
    threshold: float

    @property
    def n(self) -> int:
        """Number of training images scored."""
        return int(self.ratio.shape[0])

    @property
    def count(self) -> int:
        """Number of specific reconstructions."""
        return int(self.specific.sum())

    @property
    def rate(self) -> float:
        """Fraction of training images with a specific reconstruction."""
        return self.count / self.n

    @property
    def median_ratio(self) -> float:
        """Median distance ratio."""
        return float(self.ratio.double().median())


def standardise(x: Tensor) -> Tensor:
    """Flatten, centre and scale every image to unit norm (a constant image becomes 0)."""
    f = x.reshape(x.shape[0], -1).to(torch.float64)
    f = f - f.mean(dim=1, keepdim=True)
    norm = f.norm(dim=1, keepdim=True)
    return torch.where(norm > 0, f / norm.clamp_min(1e-300), torch.zeros_like(f))


def _check(
    train_x: Tensor, classes: Tensor, cands: Tensor, held_x: Tensor, held_classes: Tensor
) -> None:
    if classes.shape != (len(train_x),) or held_classes.shape != (len(held_x),):
        raise ShapeError(
            f"classes must be (n,) and (N,) for images {tuple(train_x.shape)} and held-out "
            f"{tuple(held_x.shape)}, received {tuple(classes.shape)} and "
            f"{tuple(held_classes.shape)}"
        )
    if cands.shape != train_x.shape:
        raise ShapeError(
            f"one matched candidate per training image is needed, received "
            f"{tuple(cands.shape)} for {tuple(train_x.shape)}"
        )
    if len(held_x) == 0 or len(train_x) == 0:
        raise ShapeError("specificity needs training images and held-out images, one set is empty")
    if train_x[0].numel() != held_x[0].numel():
        raise ShapeError(f"held-out images {tuple(held_x.shape)} do not fit {tuple(train_x.shape)}")
    missing = sorted(set(classes.tolist()) - set(held_classes.tolist()))
    if missing:
        raise ConfigError.invalid("held_classes", "every training class present", missing)


def specificity(
    train_x: Tensor,
    classes: Tensor,
    matched_candidates: Tensor,
    heldout_x: Tensor,
    heldout_classes: Tensor,
    *,
    threshold: float = 1.0,
) -> SpecificityScores:
    """The train/held-out distance ratio of every training image's matched candidate.

    Args:
        train_x: ``(n, ...)`` training images.
        classes: ``(n,)`` their (original, fine-grained) class labels.
        matched_candidates: ``(n, ...)`` the candidate matched to each training image (e.g.
            ``candidates[scores.matched]`` from :func:`~trainleak.metrics.evaluate_reconstruction`).
        heldout_x: ``(N, ...)`` held-out images the model never saw.
        heldout_classes: ``(N,)`` their class labels; every training class must occur.
        threshold: a reconstruction is specific when its ratio is below this (default 1).

    Returns:
        :class:`SpecificityScores`.

    Raises:
        ShapeError: for mismatched shapes; ConfigError: for a bad threshold or a training class
            without held-out images.
    """
    if not threshold > 0:
        raise ConfigError.invalid("threshold", "a positive ratio", threshold)
    _check(train_x, classes, matched_candidates, heldout_x, heldout_classes)
    c, t, h = standardise(matched_candidates), standardise(train_x), standardise(heldout_x)
    own = (c - t).norm(dim=1)
    dist = torch.cdist(c, h)
    same = classes.view(-1, 1) == heldout_classes.view(1, -1)
    nearest = dist.masked_fill(~same, float("inf")).min(dim=1).values
    inf = torch.full_like(own, torch.inf)
    ratio = torch.where(nearest > 0, own / nearest.clamp_min(1e-300), inf)
    return SpecificityScores(ratio=ratio, specific=ratio < threshold, threshold=float(threshold))
