"""The likelihood of a DP-SGD trajectory as a function of the target record (shared math).

Given the trajectory, the other records and their batch membership, the informed adversary
computes at each step the residual

    y_t = noisy_sum_t - sum_{i in B_t, i != target} clip_C(g_i(theta_t))
        = b_t * clip_C(g_z(theta_t)) + N(0, sigma^2 C^2 I),  b_t ~ Bernoulli(q),

so that the log-likelihood of a candidate record z is, up to a constant,

    l(z) = sum_t log[(1 - q) + q exp((<y_t, g_t> - ||g_t||^2 / 2) / (sigma C)^2)],
    g_t = clip_C(g_z(theta_t)).

Clipping follows Opacus exactly (factor min(1, C / (||g|| + 1e-6))), so the residual is the
target's contribution plus noise up to float64 round-off.

References:
    Balle, Cherubin & Hayes, *Reconstructing Training Data with Informed Adversaries*,
    S&P 2022, arXiv 2201.04845.
    Hayes, Mahloujifar & Balle, *Bounding Training Data Reconstruction in DP-SGD*,
    NeurIPS 2023, arXiv 2302.07225.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from trainleak.models.registry import build_model
from trainleak.releases.dp import DPTrajectory

GradFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class TrajectoryModel:
    """Per-sample clipped gradients of the released architecture at any theta_t."""

    def __init__(self, release: DPTrajectory) -> None:
        self.release = release
        self.model: nn.Module = build_model(release.architecture, seed=0).double()
        self.names = [n for n, _ in self.model.named_parameters()]
        self.shapes = [p.shape for _, p in self.model.named_parameters()]
        self.sizes = [p.numel() for _, p in self.model.named_parameters()]
        c = release.max_grad_norm

        def loss(flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            out = functional_call(self.model, self._unflatten(flat), (x.unsqueeze(0),))
            return nn.functional.cross_entropy(out, y.reshape(1), reduction="sum")

        per_sample = vmap(grad(loss), in_dims=(None, 0, 0))

        def clipped(flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            g = per_sample(flat, x, y)
            factor = (c / (g.norm(dim=1, keepdim=True) + 1e-6)).clamp(max=1.0)
            return g * factor

        self.clipped: GradFn = clipped

    def _unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        parts = torch.split(flat, self.sizes)
        return {n: p.reshape(s) for n, p, s in zip(self.names, parts, self.shapes)}

    def residuals(self, others: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """y_t for every step, shape ``(T, P)``: the target's share of each noisy sum."""
        rel = self.release
        x_o, y_o = others[0].double(), others[1].long()
        sums = rel.noisy_sums().clone()
        with torch.no_grad():
            for t in range(rel.steps):
                idx = rel.others_sampled[t].nonzero().flatten()
                if idx.numel():
                    sums[t] -= self.clipped(rel.params[t], x_o[idx], y_o[idx]).sum(0)
        return sums

    def log_likelihood(
        self, residuals: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        """l(z) for candidates ``(x, y)`` (``x`` of shape ``(m, *input)``), shape ``(m,)``.

        Differentiable in ``x`` (the MAP attack ascends it).
        """
        rel = self.release
        s2 = (rel.noise_multiplier * rel.max_grad_norm) ** 2
        log_q = math.log(rel.sampling_rate)
        log_1q = math.log1p(-rel.sampling_rate) if rel.sampling_rate < 1 else -math.inf
        total = torch.zeros(x.shape[0], dtype=torch.float64)
        for t in range(rel.steps):
            g = self.clipped(rel.params[t], x, y)
            a = (g @ residuals[t] - 0.5 * (g * g).sum(1)) / s2
            total = total + torch.logaddexp(torch.full_like(a, log_1q), log_q + a)
        return total
