"""Optimizer construction for the training loop (GD/SGD, Adam, Muon, Signum).

Muon (Jordan et al. 2024; ``torch.optim.Muon``) orthogonalises the momentum of every weight
matrix by Newton-Schulz iterations; it does not apply to vectors, so biases (and conv kernels,
which Muon would need reshaped) are trained by Adam at ``muon_other_lr``. Signum (Bernstein et
al. 2018) steps along the sign of the momentum; with Adam at epsilon -> 0 it shares the
l-infinity implicit bias (Gronich & Vardi 2026).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn

from trainleak.systems.training.config import TrainConfig


class Signum(torch.optim.Optimizer):
    """Sign of momentum: theta <- theta - lr * sign(m), m <- beta * m + (1 - beta) * g."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, momentum: float = 0.9) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                m = state.setdefault("m", torch.zeros_like(p))
                m.mul_(group["momentum"]).add_(p.grad, alpha=1 - group["momentum"])
                p.add_(m.sign(), alpha=-group["lr"])


def make_optimizers(model: nn.Module, cfg: TrainConfig) -> list[torch.optim.Optimizer]:
    """One or two optimizers covering every trainable parameter of ``model``."""
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer in ("gd", "sgd"):
        return [
            torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
        ]
    if cfg.optimizer == "adam":
        return [
            torch.optim.AdamW(
                params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay
            )
        ]
    if cfg.optimizer == "signum":
        return [Signum(params, lr=cfg.lr, momentum=cfg.momentum or 0.9)]
    matrices = [p for p in params if p.ndim == 2]
    others = [p for p in params if p.ndim != 2]
    opts: list[torch.optim.Optimizer] = [
        torch.optim.Muon(
            matrices, lr=cfg.lr, momentum=cfg.momentum or 0.95, weight_decay=cfg.weight_decay
        )
    ]
    if others:
        opts.append(torch.optim.AdamW(others, lr=cfg.muon_other_lr, weight_decay=0.0))
    return opts


def lr_factor(cfg: TrainConfig, step: int, loss: float) -> float:
    """Multiplier of the base learning rate at ``step`` with current training loss ``loss``."""
    if cfg.lr_schedule == "loss_normalized":
        return min(1.0 / max(loss, 1e-30), cfg.max_lr_factor)
    if cfg.lr_schedule == "inv_sqrt":
        return 1.0 / math.sqrt(1.0 + step / 100.0)
    if cfg.lr_schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * step / cfg.steps))
    return 1.0
