"""A small ConvNet for 1- or 3-channel images (optionally bias-free, hence homogeneous)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError


class ConvNet(nn.Module):
    """conv(3x3) -> ReLU -> avgpool(2), twice, then a linear head.

    Average pooling keeps the bias-free network positively homogeneous.

    Args:
        input_shape: ``(C, H, W)`` with H and W divisible by 4.
        out_dim: number of outputs.
        width: channels of the first convolution (the second has twice as many).
        bias: use biases (``False`` gives a homogeneous network).
    """

    def __init__(
        self, input_shape: Sequence[int], out_dim: int, width: int = 16, bias: bool = True
    ) -> None:
        super().__init__()
        if len(input_shape) != 3 or input_shape[1] % 4 or input_shape[2] % 4:
            raise ConfigError.invalid(
                "input_shape", "(C, H, W) with H and W divisible by 4", tuple(input_shape)
            )
        c, h, w = (int(s) for s in input_shape)
        self.features = nn.Sequential(
            nn.Conv2d(c, width, 3, padding=1, bias=bias),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=bias),
            nn.ReLU(),
            nn.AvgPool2d(2),
        )
        self.head = nn.Linear(2 * width * (h // 4) * (w // 4), out_dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))
