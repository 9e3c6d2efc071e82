"""A small residual network (two basic blocks) with instance normalisation.

Normalisation is ``GroupNorm`` with one group per channel (instance norm), as in the networks
of the dataset-distillation literature: it has no running statistics, so the network is a pure
function of its parameters and can be unrolled functionally (trajectory matching).

References:
    He, Zhang, Ren and Sun, "Deep Residual Learning for Image Recognition", CVPR 2016.
    Zhao, Mopuri and Bilen, "Dataset Condensation with Gradient Matching", ICLR 2021 (instance
    norm in distillation networks).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.registry import register_model


class BasicBlock(nn.Module):
    """conv3x3 -> norm -> ReLU -> conv3x3 -> norm, plus the (projected) input, then ReLU."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(c_out, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(c_out, c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.GroupNorm(c_out, c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.norm1(self.conv1(x)))
        return torch.relu(self.norm2(self.conv2(h)) + self.shortcut(x))


class ResNet(nn.Module):
    """Stem conv3x3, a block at full resolution, a strided block, global average pooling, linear.

    Args:
        input_shape: ``(C, H, W)`` with H and W at least 2.
        out_dim: number of outputs.
        width: channels of the stem and first block (the strided block has twice as many).

    Example:
        >>> ResNet((1, 8, 8), 10)(torch.zeros(2, 1, 8, 8)).shape
        torch.Size([2, 10])
    """

    def __init__(self, input_shape: Sequence[int], out_dim: int, width: int = 16) -> None:
        super().__init__()
        if len(input_shape) != 3 or min(int(s) for s in input_shape[1:]) < 2:
            raise ConfigError.invalid("input_shape", "(C, H, W) with H, W >= 2", input_shape)
        if width < 1 or out_dim < 1:
            raise ConfigError.invalid("width/out_dim", "positive integers", (width, out_dim))
        c = int(input_shape[0])
        self.stem = nn.Sequential(
            nn.Conv2d(c, width, 3, padding=1, bias=False), nn.GroupNorm(width, width), nn.ReLU()
        )
        self.block1 = BasicBlock(width, width, 1)
        self.block2 = BasicBlock(width, 2 * width, 2)
        self.head = nn.Linear(2 * width, int(out_dim))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Globally pooled features of the last block."""
        return self.block2(self.block1(self.stem(x))).mean(dim=(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))


register_model("resnet", ResNet)
