"""A small ConvNet for 1- or 3-channel images (optionally bias-free, hence homogeneous)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.pooling import AvgPool2x2


class ConvNet(nn.Module):
    """conv(3x3) -> [instance norm] -> ReLU -> avgpool(2), twice, then a linear head.

    Average pooling keeps the bias-free network positively homogeneous. ``norm=True`` adds
    instance normalisation (``GroupNorm`` with one group per channel) after each convolution,
    as in the ConvNet of the dataset-distillation literature (Zhao et al., ICLR 2021); it has
    no running statistics, so the network stays a pure function of its parameters. The 2x2
    average pooling is :class:`~trainleak.models.pooling.AvgPool2x2`, the same function as
    ``nn.AvgPool2d(2)`` computed as a matrix product (several times faster on CPU; the state
    dict is unchanged).

    Args:
        input_shape: ``(C, H, W)`` with H and W divisible by 4.
        out_dim: number of outputs.
        width: channels of the first convolution (the second has twice as many).
        bias: use biases (``False`` gives a homogeneous network).
        norm: instance normalisation after each convolution (not homogeneous).
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        out_dim: int,
        width: int = 16,
        bias: bool = True,
        norm: bool = False,
    ) -> None:
        super().__init__()
        if len(input_shape) != 3 or input_shape[1] % 4 or input_shape[2] % 4:
            raise ConfigError.invalid(
                "input_shape", "(C, H, W) with H and W divisible by 4", tuple(input_shape)
            )
        c, h, w = (int(s) for s in input_shape)
        layers: list[nn.Module] = []
        for c_in, c_out in ((c, width), (width, 2 * width)):
            layers.append(nn.Conv2d(c_in, c_out, 3, padding=1, bias=bias))
            if norm:
                layers.append(nn.GroupNorm(c_out, c_out))
            layers += [nn.ReLU(), AvgPool2x2()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(2 * width * (h // 4) * (w // 4), out_dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))
