"""Gradient-matching objectives, image priors and label recovery for optimisation attacks."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from trainleak.errors import ConfigError
from trainleak.releases.federated import GradientUpdate


@dataclass(frozen=True)
class GradientDistance:
    """Distance between a candidate's gradient and the observed one.

    Attributes:
        kind: ``"l2"`` (squared Euclidean, DLG) or ``"cosine"`` (1 - cosine similarity over all
            parameters at once, Inverting Gradients).
    """

    kind: str = "l2"

    def __call__(self, a: list[torch.Tensor], b: list[torch.Tensor]) -> torch.Tensor:
        if self.kind == "l2":
            return sum(((u - v) ** 2).sum() for u, v in zip(a, b))  # type: ignore[return-value]
        dot = sum((u * v).sum() for u, v in zip(a, b))
        na = torch.sqrt(sum((u**2).sum() for u in a))  # type: ignore[arg-type]
        nb = torch.sqrt(sum((v**2).sum() for v in b))  # type: ignore[arg-type]
        return 1 - dot / (na * nb).clamp_min(1e-30)

    def __repr__(self) -> str:
        return f"GradientDistance({self.kind!r})"


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of neighbouring pixels (0 for flat inputs ``(B, d)``)."""
    if x.ndim < 4:
        return x.new_zeros(())
    dh = (x[..., 1:, :] - x[..., :-1, :]).abs().mean()
    dw = (x[..., :, 1:] - x[..., :, :-1]).abs().mean()
    return dh + dw


def candidate_gradient(
    model: nn.Module, x: torch.Tensor, target: torch.Tensor
) -> list[torch.Tensor]:
    """Gradient of the mean cross-entropy at ``x``; ``target`` is labels or soft labels."""
    out = model(x)
    if target.is_floating_point():
        loss = -(target * F.log_softmax(out, dim=1)).sum(1).mean()
    else:
        loss = F.cross_entropy(out, target)
    return list(torch.autograd.grad(loss, list(model.parameters()), create_graph=True))


def last_bias(update: GradientUpdate) -> torch.Tensor:
    """The last layer's bias gradient (the output layer of the architecture)."""
    biases = [k for k, v in update.update.items() if k.endswith("bias") and v.ndim == 1]
    if not biases:
        raise ConfigError.invalid("architecture", "an output layer with a bias", "none")
    return update.update[biases[-1]]


def recover_labels(update: GradientUpdate, batch_size: int) -> torch.Tensor:
    """Labels from the output-layer bias gradient, without optimisation.

    For ``B = 1`` this is iDLG's rule, exact for cross-entropy: the true class is the only
    negative entry of ``p - e_y``. For ``B > 1`` the count of class ``c`` is estimated as
    ``-B g_c + B / C`` (the model's mean softmax taken as uniform, as in Wainakh et al.'s
    simple estimator), rounded by largest remainders to sum to ``B``.

    Args:
        update: a FedSGD gradient.
        batch_size: B.

    Returns:
        ``B`` labels, sorted.

    References:
        Zhao, Mopuri, Bilen, *iDLG: Improved Deep Leakage from Gradients*, arXiv 2001.02610.
        Wainakh et al., *User-Level Label Leakage from Gradients in Federated Learning*,
        PETS 2022.
    """
    g = last_bias(update).to(torch.float64)
    c = int(g.numel())
    if batch_size == 1:
        return torch.argmin(g).reshape(1)
    est = (-batch_size * g + batch_size / c).clamp_min(0)
    base = torch.floor(est)
    short = batch_size - int(base.sum())
    if short > 0:
        base[torch.argsort(est - base, descending=True)[:short]] += 1
    elif short < 0:
        for k in torch.argsort(est - base)[:-short]:
            base[k] = (base[k] - 1).clamp_min(0)
    return torch.repeat_interleave(torch.arange(c), base.to(torch.long))[:batch_size]
