"""Pixel-range conversions."""

from __future__ import annotations

import torch


def to_symmetric(x: torch.Tensor) -> torch.Tensor:
    """Map pixels from ``[0, 1]`` to ``[-1, 1]`` (``2x - 1``); returns a new tensor.

    Example:
        >>> to_symmetric(torch.tensor([0.0, 0.5, 1.0])).tolist()
        [-1.0, 0.0, 1.0]
    """
    return x * 2.0 - 1.0


def from_symmetric(x: torch.Tensor) -> torch.Tensor:
    """Map pixels from ``[-1, 1]`` back to ``[0, 1]`` (``(x + 1) / 2``); no clamping.

    Example:
        >>> from_symmetric(torch.tensor([-1.0, 0.0, 1.0])).tolist()
        [0.0, 0.5, 1.0]
    """
    return (x + 1.0) / 2.0
