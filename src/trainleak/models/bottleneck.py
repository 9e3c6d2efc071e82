"""Classifiers built for two training-time defenses of model inversion.

* :class:`MIDMLP`: an MLP with a stochastic Gaussian bottleneck before its head (mutual
  information regularisation, MID). Training adds ``beta * kl`` (the KL divergence of the
  bottleneck to a standard normal, stored on the module after each forward) to the loss; at
  evaluation the bottleneck passes its mean.
* :class:`MaskedMLP`: a fixed random drop layer that keeps a small share of the pixels (about
  3 % in AT-AT's motivating experiment) in front of an MLP; the mask is a buffer, so it travels
  with the weights.

References:
    Wang, Kong, Wei, Hu, Zhang and Zhou, "Improving Robustness to Model Inversion Attacks via
    Mutual Information Regularization", AAAI 2021 (MID).
    Torp, Smith and Breuer, "Reducing information dependency does not cause training data
    privacy. Adversarially non-robust features do.", ICLR 2026 (the drop-layer model).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.mlp import MLP


class MIDMLP(nn.Module):
    """ReLU MLP -> Gaussian bottleneck ``(mu, log var)`` of size ``bottleneck`` -> linear head.

    Args:
        input_shape: shape of one input.
        hidden: hidden widths of the trunk.
        out_dim: number of classes.
        bottleneck: size of the stochastic code.
    """

    def __init__(
        self, input_shape: Sequence[int], hidden: Sequence[int], out_dim: int, bottleneck: int = 32
    ) -> None:
        super().__init__()
        if int(bottleneck) < 1 or not hidden:
            raise ConfigError.invalid("bottleneck", "positive, with a hidden layer", bottleneck)
        self.trunk = MLP(input_shape, list(hidden)[:-1], int(hidden[-1]))
        self.stats = nn.Linear(int(hidden[-1]), 2 * int(bottleneck))
        self.head = nn.Linear(int(bottleneck), int(out_dim))
        self.kl = torch.zeros(())

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The bottleneck mean (the penultimate features)."""
        mu, _ = self.stats(torch.relu(self.trunk(x))).chunk(2, dim=1)
        return mu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu, logvar = self.stats(torch.relu(self.trunk(x))).chunk(2, dim=1)
        logvar = logvar.clamp(-10, 10)
        if self.training:
            z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
            self.kl = 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(1).mean()
        else:
            z = mu
        return self.head(z)


class MaskedMLP(nn.Module):
    """An MLP that only sees the pixels a fixed random mask keeps.

    Args:
        input_shape: shape of one input.
        hidden: hidden widths.
        out_dim: number of classes.
        keep: share of pixels kept (the same pixels for every channel).
        mask_seed: seed of the mask draw.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        hidden: Sequence[int],
        out_dim: int,
        keep: float = 0.03,
        mask_seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0 < float(keep) <= 1 or len(input_shape) != 3:
            raise ConfigError.invalid("keep", "a share in (0, 1] of (C, H, W) pixels", keep)
        c, h, w = (int(s) for s in input_shape)
        n_keep = max(1, round(float(keep) * h * w))
        gen = torch.Generator().manual_seed(int(mask_seed))
        perm = torch.randperm(h * w, generator=gen, device=gen.device)
        perm = perm.to(torch.get_default_device())
        self.mlp = MLP((c, n_keep), hidden, out_dim)
        self.index: torch.Tensor
        self.register_buffer("index", perm[:n_keep].sort().values)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The last hidden activation."""
        h = self._kept(x)
        for layer in self.mlp.layers[:-1]:
            h = torch.relu(layer(h))
        return h

    def _kept(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(2)[:, :, self.index].flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self._kept(x))
