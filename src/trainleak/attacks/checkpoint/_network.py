"""A differentiable view of a released homogeneous MLP for stationarity-based attacks.

KKT reconstruction needs d/dx of a function of grad_theta Phi(theta; x): a double backward.
The ReLU's derivative is a step, so (following Haim et al. 2022) the backward pass uses the
smooth gate sigmoid(alpha * z) instead, while the forward value stays relu(z).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from trainleak.errors import ConfigError
from trainleak.releases.checkpoint import Checkpoint

SUPPORTED = ("homogeneous_mlp",)


def smooth_relu(z: torch.Tensor, alpha: float) -> torch.Tensor:
    """Forward ``relu(z)``; derivative ``sigmoid(alpha * z)`` (differentiable again)."""
    soft = F.softplus(alpha * z) / alpha
    return torch.relu(z).detach() + soft - soft.detach()


@dataclass(frozen=True)
class ReleasedMLP:
    """The released weights of a homogeneous MLP as leaf tensors, in layer order."""

    weights: list[torch.Tensor]
    first_bias: torch.Tensor | None
    input_dim: int
    out_dim: int

    @classmethod
    def from_checkpoint(cls, ckpt: Checkpoint, *, which: str = "final") -> ReleasedMLP:
        """Read the layers of a ``homogeneous_mlp`` checkpoint.

        Raises:
            ConfigError: the architecture is not a homogeneous MLP.
        """
        if ckpt.architecture.kind not in SUPPORTED:
            raise ConfigError(
                f"KKT reconstruction supports homogeneous (bias-free) ReLU MLPs, architecture "
                f"kinds {list(SUPPORTED)}; the checkpoint is {ckpt.architecture.kind!r}"
            )
        state = ckpt.final if which == "final" else ckpt.initial
        if state is None:
            raise ConfigError(f"the checkpoint carries no {which} weights")
        n = len([k for k in state if k.endswith(".weight")])
        weights = [state[f"layers.{i}.weight"].detach().clone() for i in range(n)]
        extra_bias = [k for k in state if k.endswith(".bias") and k != "layers.0.bias"]
        if extra_bias:
            raise ConfigError(
                f"KKT reconstruction needs a homogeneous network: only the first layer may have "
                f"a bias, found {extra_bias}"
            )
        bias = state.get("layers.0.bias")
        return cls(
            weights=weights,
            first_bias=None if bias is None else bias.detach().clone(),
            input_dim=weights[0].shape[1],
            out_dim=weights[-1].shape[0],
        )

    def to(self, device: torch.device) -> ReleasedMLP:
        """The same network with its tensors on ``device``."""
        return replace(
            self,
            weights=[w.to(device) for w in self.weights],
            first_bias=None if self.first_bias is None else self.first_bias.to(device),
        )

    def parameters(self) -> list[torch.Tensor]:
        """All released parameters, in a fixed order (weights, then the first bias)."""
        return self.weights + ([self.first_bias] if self.first_bias is not None else [])

    def forward(self, x: torch.Tensor, params: list[torch.Tensor], alpha: float) -> torch.Tensor:
        """Network output on flattened ``x`` with the smooth-gated ReLU."""
        n_w = len(self.weights)
        h = x.flatten(1)
        for i in range(n_w):
            h = h @ params[i].T
            if i == 0 and self.first_bias is not None:
                h = h + params[n_w]
            if i < n_w - 1:
                h = smooth_relu(h, alpha)
        return h

    @property
    def degree(self) -> int:
        """Homogeneity degree (number of weight layers)."""
        return len(self.weights)
