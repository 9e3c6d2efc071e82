"""2x2 average pooling as one small matrix product.

On CPU, ``torch.nn.functional.avg_pool2d`` with a 2x2 window runs far below memory speed on the
small feature maps of this library's networks (``benchmarks/results/pooling.md``, the two-core
machine, one thread, float32, batches of 100 and 256 on the digits and CIFAR-10 ConvNet maps:
the product is 6-9x faster forward, 3.3-7.2x forward and backward, 1.6-2.8x in the double
backward that trajectory matching takes). A 2x2 average is linear: in the contiguous
NCHW layout the two rows a window covers are adjacent, so every pair of rows (length 2W) maps to
one output row (length W/2) through a fixed (2W, W/2) matrix with 0.25 at the four places of each
window. The product, its backward and every higher derivative are matrix products, so the
pooling stays a pure, linear, positively homogeneous function of its input (the ConvNet's
homogeneity is unchanged) and works under ``torch.func`` transforms.

Scaling by 0.25 is exact, so the outputs agree with ``avg_pool2d`` up to the order in which the
matrix library adds the four terms: equal on every case the tests draw (float32 and float64) and
on the digits distillations (all 93 sets of the default ``distillation-leakage`` run identical
byte for byte), but at some CIFAR-10 batch shapes one rounding unit apart (1.8e-7 on a DM set
after 3 iterations), which a long distillation grows into different sets (after the full DM
and DC runs of ``benchmarks/pooling.py --dataset cifar10``, pixels up to 0.18 and 0.37 apart).
Results recorded with ``avg_pool2d`` on CIFAR-10 therefore reproduce in distribution, not bit
for bit.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_MATRICES: dict[tuple[int, torch.dtype, torch.device], torch.Tensor] = {}


def _row_pair_matrix(width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The (2 * width, width // 2) matrix taking two adjacent image rows to their pooled row."""
    key = (width, dtype, device)
    m = _MATRICES.get(key)
    if m is None:
        # a normal tensor even when first asked for under inference mode, so a later training
        # step can save it for its backward
        with torch.inference_mode(False):
            half = width // 2
            m = torch.zeros(2 * width, half, dtype=dtype, device=device)
            cols = torch.arange(width, device=device) // 2
            rows = torch.arange(width, device=device)
            m[rows, cols] = 0.25  # the upper row of each window
            m[rows + width, cols] = 0.25  # the lower row
        _MATRICES[key] = m
    return m


def avg_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """``F.avg_pool2d(x, 2)`` for a floating ``(N, C, H, W)`` input.

    Even H and W take the matrix product; anything else (odd sizes, which ``avg_pool2d``
    floors, other ranks, integer tensors) is handed to ``avg_pool2d`` unchanged.
    """
    if x.dim() != 4 or not x.is_floating_point() or x.shape[-2] % 2 or x.shape[-1] % 2:
        return F.avg_pool2d(x, 2)
    n, c, h, w = x.shape
    m = _row_pair_matrix(int(w), x.dtype, x.device)
    return (x.reshape(-1, 2 * w) @ m).reshape(n, c, h // 2, w // 2)


class AvgPool2x2(nn.Module):
    """``nn.AvgPool2d(2)`` computed by :func:`avg_pool_2x2` (no parameters, no buffers, so a
    network's state dict is the same with either)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return avg_pool_2x2(x)
