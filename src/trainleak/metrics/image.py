"""Per-pair image metrics: PSNR, SSIM and per-sample min-max normalisation.

Images are batches ``(N, C, H, W)``; ``(N, H, W)`` is read as one channel and flat vectors
``(N, D)`` are reshaped to ``image_shape`` (or to a square ``(1, s, s)`` when ``D = s * s``).
PSNR and SSIM come from torchmetrics, one value per pair.

SSIM is the standard Gaussian-window SSIM (window 11, sigma 1.5, k1 = 0.01, k2 = 0.03). Small
images are first upsampled bilinearly so that their short side is at least
:data:`SSIM_MIN_SIDE` (16) pixels: an 11-pixel window needs room, and this is the evaluation the
calibration runs used (8x8 digits scored at 16x16). The choice is documented rather than hidden,
because SSIM on tiny images depends on it.

Example:
    >>> import torch
    >>> x = torch.rand(4, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    >>> ssim(x, x).tolist()
    [1.0, 1.0, 1.0, 1.0]
    >>> bool(torch.isinf(psnr(x, x)).all())
    True
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics.functional.image import (
    peak_signal_noise_ratio,
    structural_similarity_index_measure,
)

from trainleak.errors import ShapeError
from trainleak.validation import check_positive

SSIM_MIN_SIDE = 16
"""Images whose short side is below this many pixels are upsampled before SSIM."""


def as_image_batch(x: Tensor, image_shape: tuple[int, ...] | None = None) -> Tensor:
    """View ``x`` as a float batch of images ``(N, C, H, W)``.

    Args:
        x: ``(N, C, H, W)``, ``(N, H, W)`` or flat ``(N, D)``.
        image_shape: the shape of one image, ``(C, H, W)`` or ``(H, W)``; needed for flat
            inputs unless ``D`` is a perfect square (then ``(1, s, s)``).

    Returns:
        A floating tensor of shape ``(N, C, H, W)``.

    Raises:
        ShapeError: when ``x`` cannot be read as a batch of images.
    """
    if not isinstance(x, Tensor):
        raise ShapeError(f"expected a torch.Tensor of images, received {type(x).__name__}")
    x = x if x.is_floating_point() else x.float()
    if image_shape is not None:
        shape = tuple(image_shape)
        shape = (1, *shape) if len(shape) == 2 else shape
        if len(shape) != 3 or x.ndim < 1 or x.numel() != x.shape[0] * math.prod(shape):
            raise ShapeError(
                f"image_shape {tuple(image_shape)} does not fit inputs of shape {tuple(x.shape)}"
            )
        return x.reshape(x.shape[0], *shape)
    if x.ndim == 4:
        return x
    if x.ndim == 3:
        return x.unsqueeze(1)
    if x.ndim == 2:
        side = math.isqrt(x.shape[1])
        if side * side == x.shape[1]:
            return x.reshape(x.shape[0], 1, side, side)
    raise ShapeError(
        f"expected images (N, C, H, W), (N, H, W) or square flat (N, s*s), received shape "
        f"{tuple(x.shape)}; pass image_shape for other flat inputs"
    )


def _pair(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    a, b = as_image_batch(a), as_image_batch(b)
    if a.shape != b.shape:
        raise ShapeError(
            f"image pairs need equal shapes, received {tuple(a.shape)} and {tuple(b.shape)}"
        )
    dtype = torch.promote_types(a.dtype, b.dtype)
    return a.to(dtype), b.to(dtype)


def minmax_normalize(x: Tensor) -> Tensor:
    """Rescale every sample to ``[0, 1]`` by its own minimum and maximum.

    Args:
        x: a batch ``(N, ...)``.

    Returns:
        A tensor of the same shape; constant samples map to 0.5 everywhere.

    Example:
        >>> minmax_normalize(torch.tensor([[2.0, 4.0, 3.0], [5.0, 5.0, 5.0]])).tolist()
        [[0.0, 1.0, 0.5], [0.5, 0.5, 0.5]]
    """
    x = x if x.is_floating_point() else x.float()
    flat = x.reshape(x.shape[0], -1)
    lo = flat.min(dim=1, keepdim=True).values
    span = flat.max(dim=1, keepdim=True).values - lo
    const = span <= 0
    out = (flat - lo) / torch.where(const, torch.ones_like(span), span)
    out = torch.where(const, torch.full_like(out, 0.5), out)
    return out.reshape(x.shape)


def upsample_for_ssim(x: Tensor, min_side: int = SSIM_MIN_SIDE) -> Tensor:
    """Bilinearly upsample ``(N, C, H, W)`` images whose short side is below ``min_side``.

    The aspect ratio is kept; images already large enough are returned unchanged.
    """
    h, w = x.shape[-2:]
    short = min(h, w)
    if short >= min_side:
        return x
    size = (round(h * min_side / short), round(w * min_side / short))
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


def psnr(a: Tensor, b: Tensor, data_range: float = 1.0) -> Tensor:
    """Peak signal-to-noise ratio in dB of each pair ``(a[i], b[i])``.

    Args:
        a: images ``(N, ...)`` (see :func:`as_image_batch`).
        b: images of the same shape.
        data_range: the span of the value range (1.0 for ``[0, 1]`` images).

    Returns:
        ``(N,)`` PSNR values; identical pairs give ``inf``.
    """
    check_positive("data_range", data_range)
    a, b = _pair(a, b)
    out = peak_signal_noise_ratio(a, b, data_range=data_range, reduction="none", dim=(1, 2, 3))
    return out.reshape(a.shape[0])


def ssim(a: Tensor, b: Tensor, data_range: float = 1.0) -> Tensor:
    """Standard Gaussian-window SSIM of each pair ``(a[i], b[i])``.

    Images with a short side below :data:`SSIM_MIN_SIDE` are upsampled bilinearly first (see
    the module docstring).

    Args:
        a: images ``(N, ...)`` (see :func:`as_image_batch`).
        b: images of the same shape.
        data_range: the span of the value range (1.0 for ``[0, 1]`` images).

    Returns:
        ``(N,)`` SSIM values in ``[-1, 1]``; identical pairs give 1.

    References:
        Wang, Bovik, Sheikh and Simoncelli, "Image quality assessment: from error visibility to
        structural similarity", IEEE TIP 2004.
    """
    check_positive("data_range", data_range)
    a, b = _pair(a, b)
    if a.shape[0] == 0:
        return torch.zeros(0, dtype=a.dtype)
    a, b = upsample_for_ssim(a), upsample_for_ssim(b)
    out = structural_similarity_index_measure(a, b, data_range=data_range, reduction="none")
    return cast(Tensor, out).reshape(a.shape[0])


_SSIM_SIGMA = 1.5
_SSIM_KERNEL = 11  # torchmetrics: int(3.5 * sigma + 0.5) * 2 + 1
_PAIR_BUDGET = 2**22  # elements per intermediate tensor in ssim_matrix


def _gaussian_weights(dtype: torch.dtype) -> Tensor:
    """The flattened 11x11 Gaussian window torchmetrics uses (outer product of 1-D windows)."""
    k = _SSIM_KERNEL
    dist = torch.arange((1 - k) / 2, (1 + k) / 2, 1.0, dtype=dtype)
    g = torch.exp(-((dist / _SSIM_SIGMA) ** 2) / 2)
    g = g / g.sum()
    return torch.outer(g, g).reshape(-1)


def _windows(x: Tensor) -> Tensor:
    """Reflect-padded 11x11 windows around every pixel, pixel-major: ``(C*H*W, N, 121)``."""
    pad = (_SSIM_KERNEL - 1) // 2
    n, c, h, w = x.shape
    cols = F.unfold(F.pad(x, (pad, pad, pad, pad), mode="reflect"), kernel_size=_SSIM_KERNEL)
    cols = cols.reshape(n, c, _SSIM_KERNEL**2, h * w).permute(1, 3, 0, 2)  # (C, HW, N, Q)
    return cols.reshape(c * h * w, n, -1).contiguous()


def _ssim_block(a: Tensor, b: Tensor, wts: Tensor, c1: float, c2: float) -> Tensor:
    """SSIM of every pair of two window blocks ``(P, na, Q)`` and ``(P, nb, Q)``: ``(na, nb)``.

    The same arithmetic as torchmetrics' ``_ssim_update``, with the local cross-moment of every
    pair as one batched matrix product.
    """
    mu_a, mu_b = a @ wts, b @ wts  # (P, na), (P, nb)
    var_a = ((a * a) @ wts - mu_a**2).clamp_min(0.0)
    var_b = ((b * b) @ wts - mu_b**2).clamp_min(0.0)
    mu_ab = mu_a[:, :, None] * mu_b[:, None, :]
    cov = torch.bmm(a * wts, b.transpose(1, 2)).sub_(mu_ab)  # (P, na, nb)
    num = mu_ab.mul_(2).add_(c1).mul_(cov.mul_(2).add_(c2))
    den = (mu_a[:, :, None] ** 2 + mu_b[:, None, :] ** 2 + c1).mul_(
        var_a[:, :, None] + var_b[:, None, :] + c2
    )
    return num.div_(den).mean(dim=0)


def ssim_matrix(a: Tensor, b: Tensor, data_range: float = 1.0) -> Tensor:
    """SSIM of every image in ``a`` against every image in ``b``, as an ``(n, m)`` matrix.

    Computes the same quantity as :func:`ssim` on all ``n * m`` pairs (same window, padding
    and upsampling), but with each local cross-moment as one batched matrix product instead of
    ``n * m`` convolutions, in blocks that bound memory. Values agree with :func:`ssim` to
    float rounding; use it to search, and :func:`ssim` to report.

    Args:
        a: ``n`` images (see :func:`as_image_batch`).
        b: ``m`` images of the same image shape.
        data_range: the span of the value range.

    Returns:
        ``(n, m)`` SSIM values.
    """
    check_positive("data_range", data_range)
    a, b = as_image_batch(a), as_image_batch(b)
    if a.shape[1:] != b.shape[1:]:
        raise ShapeError(f"image shapes differ: {tuple(a.shape[1:])} and {tuple(b.shape[1:])}")
    dtype = torch.promote_types(a.dtype, b.dtype)
    a, b = upsample_for_ssim(a.to(dtype)), upsample_for_ssim(b.to(dtype))
    wts = _gaussian_weights(dtype)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    pix, q = a[0].numel() if len(a) else 1, wts.numel()
    mb = max(1, min(len(b), _PAIR_BUDGET // (pix * q)))
    na = max(1, min(len(a), _PAIR_BUDGET // (pix * q), _PAIR_BUDGET // (pix * mb)))
    out = torch.empty(len(a), len(b), dtype=dtype)
    for j in range(0, len(b), mb):
        wb = _windows(b[j : j + mb])
        for i in range(0, len(a), na):
            out[i : i + na, j : j + mb] = _ssim_block(_windows(a[i : i + na]), wb, wts, c1, c2)
    return out
