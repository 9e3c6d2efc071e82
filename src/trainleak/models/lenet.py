"""A LeNet-style network: two 5x5 convolutions with max pooling, then two linear layers.

References:
    LeCun, Bottou, Bengio and Haffner, "Gradient-based learning applied to document
    recognition", Proc. IEEE 1998 (the layout; sizes here are scaled to small images).
    He, Zhang, Ren and Sun, "Delving Deep into Rectifiers", ICCV 2015 (the initialisation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.registry import register_model

Init = Literal["he", "torch"]


class LeNet(nn.Module):
    """conv5x5 -> ReLU -> maxpool(2), twice, then linear -> ReLU -> linear.

    Args:
        input_shape: ``(C, H, W)`` with H and W divisible by 4.
        out_dim: number of outputs.
        widths: channels of the two convolutions (LeNet-5 has 6 and 16).
        hidden: width of the hidden linear layer (LeNet-5 has 84).
        init: ``he`` (default) draws every ReLU layer's weights from N(0, 2 / fan_in) and the
            output layer's from N(0, 1 / fan_in), biases zero (He et al. 2015), so the signal
            keeps its scale through the network; ``torch`` keeps PyTorch's default (variance
            1 / (3 fan_in) per layer), under which the signal shrinks about 2x per ReLU layer.

    [inferred] Issue 16, fifth pass: under ``torch`` the logits of a fresh LeNet on digits
    have std 0.08 (about 0.05 after the second convolution), so a fresh network starts on a
    plateau: trained 300 steps at 0.01 on 10 real digits per class it reached 0.32-0.62
    (eight draws), and at 0.05 with momentum 0.9 on MNIST it overshot once it left the
    plateau (0.61-0.81). Under ``he``: digits 0.85-0.89 at either rate, MNIST 0.76-0.82
    (docs/decisions.md).

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
        init: Init = "he",
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
        if init not in ("he", "torch"):
            raise ConfigError.invalid("init", "'he' or 'torch'", init)
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
        if init == "he":
            self._he_init()

    def _he_init(self) -> None:
        for layer in self.modules():
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                if layer is self.head:
                    nn.init.kaiming_normal_(layer.weight, nonlinearity="linear")
                else:
                    nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The penultimate features (after the hidden linear layer's ReLU)."""
        return torch.relu(self.fc(self.features(x).flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))


register_model("lenet", LeNet)
