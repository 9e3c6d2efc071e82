"""Multi-layer perceptrons, including the bias-free (positively homogeneous) variant.

A bias-free ReLU MLP with L layers is L-homogeneous: Phi(c*theta; x) = c^L * Phi(theta; x).
Gradient flow on such networks with an exponentially-tailed loss converges in direction to a
KKT point of the l2 max-margin problem (Lyu & Li, ICLR 2020), which is what KKT-based
reconstruction (Haim et al., NeurIPS 2022) exploits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError


def _check_dims(input_shape: Sequence[int], hidden: Sequence[int], out_dim: int) -> int:
    if len(input_shape) == 0 or any(int(s) <= 0 for s in input_shape):
        raise ConfigError.invalid("input_shape", "a non-empty shape of positive sizes", input_shape)
    if any(int(h) <= 0 for h in hidden):
        raise ConfigError.invalid("hidden", "positive layer widths", list(hidden))
    if out_dim <= 0:
        raise ConfigError.invalid("out_dim", "a positive integer", out_dim)
    return math.prod(int(s) for s in input_shape)


class MLP(nn.Module):
    """A ReLU MLP on flattened inputs, with biases.

    Args:
        input_shape: shape of one input, e.g. ``(1, 28, 28)``.
        hidden: hidden-layer widths.
        out_dim: number of outputs (1 for a binary logistic model).
    """

    def __init__(self, input_shape: Sequence[int], hidden: Sequence[int], out_dim: int) -> None:
        super().__init__()
        d = _check_dims(input_shape, hidden, out_dim)
        widths = [d, *[int(h) for h in hidden], int(out_dim)]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.flatten(1)
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < len(self.layers) - 1:
                h = torch.relu(h)
        return h


class HomogeneousMLP(nn.Module):
    """A bias-free ReLU MLP (optionally with a first-layer bias), homogeneous in its weights.

    Weights are drawn from N(0, init_scale^2 / fan_in) * sqrt(2) (He init times
    ``init_scale``), so ``init_scale`` controls how far from the origin training starts: small
    values put training in the rich (margin-maximising) regime used by Haim et al.

    Args:
        input_shape: shape of one input.
        hidden: hidden-layer widths.
        out_dim: number of outputs.
        init_scale: multiplier of He initialisation.
        first_bias: give the first layer a bias (Haim et al.'s networks have one; the network
            is then homogeneous in all parameters except that bias).
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        hidden: Sequence[int],
        out_dim: int = 1,
        init_scale: float = 1.0,
        first_bias: bool = False,
    ) -> None:
        super().__init__()
        d = _check_dims(input_shape, hidden, out_dim)
        if not init_scale > 0:
            raise ConfigError.invalid("init_scale", "a positive number", init_scale)
        widths = [d, *[int(h) for h in hidden], int(out_dim)]
        self.layers = nn.ModuleList(
            nn.Linear(a, b, bias=first_bias and i == 0)
            for i, (a, b) in enumerate(zip(widths[:-1], widths[1:]))
        )
        self.init_scale = float(init_scale)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw weights with the global torch RNG (seed it via ``build_model(..., seed=)``)."""
        with torch.no_grad():
            for layer in self.layers:
                if not isinstance(layer, nn.Linear):
                    raise TypeError("unexpected type: expected isinstance(layer, nn.Linear)")
                std = self.init_scale * math.sqrt(2.0 / layer.in_features)
                layer.weight.normal_(0.0, std)
                if layer.bias is not None:
                    layer.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.flatten(1)
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < len(self.layers) - 1:
                h = torch.relu(h)
        return h
