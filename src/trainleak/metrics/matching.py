"""Matching reconstructions to training images, and scoring the matched pairs.

The evaluation follows Haim et al. (2022, section 5 and their released code): every training
image is paired with a candidate (by default the nearest one by normalised cross-correlation),
the training mean that the model subtracted is added back to both, each image is min-max
normalised on its own, and the pair is scored with SSIM (and PSNR). Candidate scale is arbitrary
for most attacks, so scoring without normalisation undersells them badly.

Example:
    >>> import torch
    >>> x = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    >>> scores = evaluate_reconstruction(x, x.flip(0))
    >>> scores.matched.tolist()
    [5, 4, 3, 2, 1, 0]
    >>> scores.counts[0.6]
    6
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from trainleak.errors import ShapeError
from trainleak.metrics.image import as_image_batch, minmax_normalize, psnr, ssim, ssim_matrix
from trainleak.validation import check_choice, check_in_range

MatchMethod = Literal["ncc", "hungarian", "best_ssim"]


def _flat64(x: Tensor) -> Tensor:
    return x.reshape(x.shape[0], -1).to(torch.float64)


def ncc_matrix(a: Tensor, b: Tensor) -> Tensor:
    """Normalised cross-correlation of every flattened ``a[i]`` with every ``b[j]``.

    Each image is centred and scaled to unit norm, so the result is the Pearson correlation of
    pixel values, in ``[-1, 1]``. A constant image correlates 0 with everything.

    Args:
        a: ``(n, ...)`` images.
        b: ``(m, ...)`` images with the same number of values per image.

    Returns:
        ``(n, m)`` float64 matrix.

    Raises:
        ShapeError: when the images have different sizes.
    """
    if math.prod(a.shape[1:]) != math.prod(b.shape[1:]):
        raise ShapeError(f"cannot correlate images of shapes {tuple(a.shape)} and {tuple(b.shape)}")
    fa, fb = _flat64(a), _flat64(b)
    fa = fa - fa.mean(dim=1, keepdim=True)
    fb = fb - fb.mean(dim=1, keepdim=True)
    na = fa.norm(dim=1, keepdim=True)
    nb = fb.norm(dim=1, keepdim=True)
    fa = torch.where(na > 0, fa / na.clamp_min(1e-300), torch.zeros_like(fa))
    fb = torch.where(nb > 0, fb / nb.clamp_min(1e-300), torch.zeros_like(fb))
    return fa @ fb.T


def match_nearest(train: Tensor, cands: Tensor, by: Literal["ncc", "l2"] = "ncc") -> Tensor:
    """Index of the best candidate for every training image (candidates may repeat).

    Args:
        train: ``(n, ...)`` training images.
        cands: ``(m, ...)`` candidates.
        by: ``"ncc"`` (highest normalised cross-correlation) or ``"l2"`` (smallest distance).

    Returns:
        ``(n,)`` long tensor of candidate indices.
    """
    check_choice("by", by, ("ncc", "l2"))
    _need_candidates(cands)
    if by == "ncc":
        return ncc_matrix(train, cands).argmax(dim=1)
    return torch.cdist(_flat64(train), _flat64(cands)).argmin(dim=1)


def match_hungarian(train: Tensor, cands: Tensor) -> Tensor:
    """One-to-one matching maximising the total NCC (no candidate is used twice).

    Args:
        train: ``(n, ...)`` training images.
        cands: ``(m, ...)`` candidates, ``m >= n``.

    Returns:
        ``(n,)`` long tensor of distinct candidate indices.

    Raises:
        ShapeError: when there are fewer candidates than training images.
    """
    if len(cands) < len(train):
        raise ShapeError(
            f"one-to-one matching needs at least as many candidates as training images, "
            f"received {len(cands)} candidates for {len(train)} images"
        )
    rows, cols = linear_sum_assignment(-ncc_matrix(train, cands).numpy())
    matched = np.empty(len(train), dtype=np.int64)
    matched[rows] = cols
    return torch.from_numpy(matched)


def _need_candidates(cands: Tensor) -> None:
    if len(cands) == 0:
        raise ShapeError("at least one candidate is needed, received an empty tensor")


@dataclass(frozen=True)
class ReconstructionScores:
    """Per-training-image scores of a reconstruction, and their summaries.

    Attributes:
        ssim: ``(n,)`` SSIM of each training image with its matched candidate.
        psnr: ``(n,)`` PSNR in dB of the same pairs (``inf`` for identical pairs).
        matched: ``(n,)`` index of the candidate matched to each training image.
        counts: number of training images with SSIM ``>=`` each threshold.
        median_ssim: median of ``ssim``.
        mean_top10_ssim: mean of the 10 highest values of ``ssim`` (all of them when n < 10).
        match: the matching rule used.
    """

    ssim: Tensor
    psnr: Tensor
    matched: Tensor
    counts: Mapping[float, int]
    median_ssim: float
    mean_top10_ssim: float
    match: str = "ncc"

    @property
    def n(self) -> int:
        """Number of training images scored."""
        return int(self.ssim.shape[0])

    def summary(self) -> dict[str, float]:
        """Scalar summaries: counts per threshold, median and top-10 SSIM, PSNR, n."""
        out = {
            "n": float(self.n),
            "median_ssim": self.median_ssim,
            "mean_top10_ssim": self.mean_top10_ssim,
            "mean_ssim": float(self.ssim.double().mean()),
            "median_psnr": float(np.median(self.psnr.double().numpy())),
        }
        for t, c in self.counts.items():
            out[count_key(t)] = float(c)
        return out

    def to_row(self, name: str) -> dict[str, Any]:
        """One table row: ``method`` then the summary (counts and n as integers)."""
        row: dict[str, Any] = {"method": name}
        for key, value in self.summary().items():
            is_count = key == "n" or key.startswith("ssim>=")
            row[key] = int(value) if is_count else value
        return row


def count_key(threshold: float) -> str:
    """The summary key of the count at ``threshold``, e.g. ``"ssim>=0.4"``."""
    return f"ssim>={threshold:g}"


def evaluate_reconstruction(
    train_x: Tensor,
    candidates: Tensor,
    *,
    match: MatchMethod = "ncc",
    normalize: bool = True,
    thresholds: Sequence[float] = (0.4, 0.6),
    offset: Tensor | None = None,
    data_range: float = 1.0,
    image_shape: tuple[int, ...] | None = None,
) -> ReconstructionScores:
    """Match every training image to a candidate and score the pairs.

    Steps: add ``offset`` back to both sets (e.g. the training mean image the model subtracted),
    min-max normalise every image on its own (when ``normalize``), match, then compute SSIM and
    PSNR of each training image with its match.

    Args:
        train_x: ``(n, ...)`` ground-truth training images, in the model's input space.
        candidates: ``(m, ...)`` reconstructions, in the same space.
        match: ``"ncc"`` nearest candidate by normalised cross-correlation (Haim et al.);
            ``"hungarian"`` one-to-one assignment maximising total NCC (needs ``m >= n``);
            ``"best_ssim"`` the candidate with the highest SSIM (an optimistic upper view).
        normalize: min-max normalise each image to ``[0, 1]`` before scoring.
        thresholds: SSIM thresholds for ``counts`` (a pair counts when SSIM ``>=`` threshold).
        offset: added to both sets before normalisation; one image's worth of values, or a
            tensor broadcastable to ``(n, C, H, W)``.
        data_range: the value span used by SSIM and PSNR when ``normalize`` is False.
        image_shape: shape of one image, for flat inputs (see ``as_image_batch``).

    Returns:
        A :class:`ReconstructionScores`.

    Raises:
        ShapeError: when the shapes of the sets (or the offset) do not agree.
        ConfigError: for an unknown ``match`` or a threshold outside ``[-1, 1]``.

    References:
        Haim, Vardi, Yehudai, Shamir and Irani, "Reconstructing Training Data from Trained
        Neural Networks", NeurIPS 2022, section 5.
    """
    check_choice("match", match, ("ncc", "hungarian", "best_ssim"))
    for t in thresholds:
        check_in_range("thresholds", t, -1.0, 1.0)
    train, cands = _prepare(train_x, candidates, offset, normalize, image_shape)
    range_ = 1.0 if normalize else data_range
    if match == "ncc":
        matched = match_nearest(train, cands)
    elif match == "hungarian":
        matched = match_hungarian(train, cands)
    else:
        matched = ssim_matrix(train, cands, range_).argmax(dim=1)
    paired = cands[matched]
    s, p = ssim(train, paired, range_), psnr(train, paired, range_)
    return _scores(s, p, matched, thresholds, match)


def _prepare(
    train_x: Tensor,
    candidates: Tensor,
    offset: Tensor | None,
    normalize: bool,
    image_shape: tuple[int, ...] | None,
) -> tuple[Tensor, Tensor]:
    train = as_image_batch(train_x, image_shape)
    cands = as_image_batch(candidates, image_shape)
    if train.shape[1:] != cands.shape[1:]:
        raise ShapeError(
            f"training images {tuple(train.shape)} and candidates {tuple(cands.shape)} differ "
            f"in image shape"
        )
    if len(train) == 0:
        raise ShapeError("at least one training image is needed, received an empty tensor")
    _need_candidates(cands)
    dtype = torch.promote_types(train.dtype, cands.dtype)
    train, cands = train.to(dtype), cands.to(dtype)
    if offset is not None:
        off = _as_offset(offset, tuple(train.shape[1:])).to(dtype)
        train, cands = train + off, cands + off
    if normalize:
        train, cands = minmax_normalize(train), minmax_normalize(cands)
    return train, cands


def _as_offset(offset: Tensor, image_shape: tuple[int, ...]) -> Tensor:
    if offset.numel() == math.prod(image_shape):
        return offset.reshape(1, *image_shape)
    try:
        torch.broadcast_shapes(offset.shape, (1, *image_shape))
    except RuntimeError:
        raise ShapeError(
            f"offset of shape {tuple(offset.shape)} does not fit images of shape {image_shape}"
        ) from None
    return offset


def _scores(
    s: Tensor, p: Tensor, matched: Tensor, thresholds: Sequence[float], match: str
) -> ReconstructionScores:
    s64 = s.double()
    top = torch.topk(s64, k=min(10, len(s64))).values
    return ReconstructionScores(
        ssim=s,
        psnr=p,
        matched=matched,
        counts={float(t): int((s64 >= t).sum()) for t in thresholds},
        median_ssim=float(np.median(s64.numpy())),
        mean_top10_ssim=float(top.mean()),
        match=match,
    )
