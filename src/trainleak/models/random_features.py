"""The random-feature model f(x) = a^T sigma(W x): a frozen random first layer, a trained last one.

Trained by gradient descent on the squared loss from a_0 (or solved in closed form, which is
where gradient descent converges), the change a_T - a_0 is the minimum-norm correction
Phi^T (Phi Phi^T)^{-1} (y - Phi a_0), with Phi = sigma(X W^T): it lies in the span of the
training points' feature vectors. That is the fact parameter-change matching inverts
(:mod:`trainleak.attacks.checkpoint.init_final`), and the setting of the finite-width recovery
guarantee (:mod:`trainleak.bounds.random_features`).

References:
    Iurada, Bombari, Tommasi and Mondelli, "A Law of Data Reconstruction for Random Features
    (and Beyond)", ICLR 2026, arXiv 2509.22214.
    Tansley, Makhlouf, Massart et al., "Efficient Techniques for Data Reconstruction, with
    Finite-Width Recovery Guarantees", arXiv 2605.06519, 2026.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.registry import register_model

Activation = Literal["relu", "tanh", "relu_tanh"]
ACTIVATIONS: tuple[str, ...] = ("relu", "tanh", "relu_tanh")


def activation_fn(name: str, z: torch.Tensor) -> torch.Tensor:
    """sigma(z) for ``relu``, ``tanh`` or ``relu_tanh`` (relu(z) + tanh(z)).

    ``relu_tanh`` is neither even nor odd, so the sign ambiguity of symmetric activations
    does not arise [inferred: the brief's "ReLU+tanh"].
    """
    if name == "relu":
        return torch.relu(z)
    if name == "tanh":
        return torch.tanh(z)
    if name == "relu_tanh":
        return torch.relu(z) + torch.tanh(z)
    raise ConfigError.invalid("activation", f"one of {list(ACTIVATIONS)}", name)


def activation_grad(name: str, z: torch.Tensor) -> torch.Tensor:
    """sigma'(z) for the activations of :func:`activation_fn` (the ReLU step at 0 is 0)."""
    step = (z > 0).to(z.dtype)
    if name == "relu":
        return step
    if name == "tanh":
        return 1 - torch.tanh(z) ** 2
    if name == "relu_tanh":
        return step + 1 - torch.tanh(z) ** 2
    raise ConfigError.invalid("activation", f"one of {list(ACTIVATIONS)}", name)


class RandomFeatures(nn.Module):
    """f(x) = last(sigma(first(x))) with ``first`` frozen: W ~ N(0, 1/d), a_0 ~ N(0, 1/p).

    Args:
        input_shape: shape of one input (flattened to d values).
        width: number of random features p.
        out_dim: number of outputs.
        activation: ``relu``, ``tanh`` or ``relu_tanh``.

    Example:
        >>> m = RandomFeatures(input_shape=(5,), width=16)
        >>> m(torch.zeros(2, 5)).shape, m.first.weight.requires_grad
        (torch.Size([2, 1]), False)
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        width: int,
        out_dim: int = 1,
        activation: Activation = "relu_tanh",
    ) -> None:
        super().__init__()
        if len(input_shape) == 0 or any(int(s) <= 0 for s in input_shape):
            raise ConfigError.invalid("input_shape", "a shape of positive sizes", input_shape)
        if int(width) < 1 or int(out_dim) < 1:
            raise ConfigError.invalid("width/out_dim", "positive integers", (width, out_dim))
        if activation not in ACTIVATIONS:
            raise ConfigError.invalid("activation", f"one of {list(ACTIVATIONS)}", activation)
        d = math.prod(int(s) for s in input_shape)
        self.activation: str = activation
        self.first = nn.Linear(d, int(width), bias=False)
        self.last = nn.Linear(int(width), int(out_dim), bias=False)
        with torch.no_grad():
            self.first.weight.normal_(0.0, 1.0 / math.sqrt(d))
            self.last.weight.normal_(0.0, 1.0 / math.sqrt(int(width)))
        self.first.weight.requires_grad_(False)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """sigma(W x), shape ``(n, p)``."""
        return activation_fn(self.activation, self.first(x.flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(self.features(x))


register_model("random_features", RandomFeatures)
