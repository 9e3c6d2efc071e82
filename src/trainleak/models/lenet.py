"""A LeNet-style network: two 5x5 convolutions with max pooling, then two linear layers.

References:
    LeCun, Bottou, Bengio and Haffner, "Gradient-based learning applied to document
    recognition", Proc. IEEE 1998 (the layout; sizes here are scaled to small images).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.registry import register_model


class LeNet(nn.Module):
    """conv5x5 -> ReLU -> maxpool(2), twice, then linear -> ReLU -> linear.

    Args:
        input_shape: ``(C, H, W)`` with H and W divisible by 4.
        out_dim: number of outputs.
        widths: channels of the two convolutions (LeNet-5 has 6 and 16).
        hidden: width of the hidden linear layer (LeNet-5 has 84).

    Example:
        >>> LeNet((1, 8, 8), 10)(torch.zeros(2, 1, 8, 8)).shape
        torch.Size([2, 10])
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        out_dim: int,
        widths: Sequence[int] = (6, 16),
        hidden: int = 84,
    ) -> None:
        super().__init__()
        if len(input_shape) != 3 or input_shape[1] % 4 or input_shape[2] % 4:
            raise ConfigError.invalid(
                "input_shape", "(C, H, W) with H and W divisible by 4", tuple(input_shape)
            )
        if len(widths) != 2 or min(widths) < 1 or hidden < 1 or out_dim < 1:
            raise ConfigError.invalid(
                "widths/hidden/out_dim", "two positive widths, positive sizes", (widths, hidden)
            )
        c, h, w = (int(s) for s in input_shape)
        w1, w2 = (int(v) for v in widths)
        self.features = nn.Sequential(
            nn.Conv2d(c, w1, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(w1, w2, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.fc = nn.Linear(w2 * (h // 4) * (w // 4), int(hidden))
        self.head = nn.Linear(int(hidden), int(out_dim))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The penultimate features (after the hidden linear layer's ReLU)."""
        return torch.relu(self.fc(self.features(x).flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))


register_model("lenet", LeNet)
