"""Structural losses for Gaussian-activation MLPs (coverage, separation, overlap) and their loop.

Every loss is returned per replica, shape ``(n_models,)``, so one optimiser step trains many
independent networks (seeds, loss masks, temperatures) at once; replicas share no parameters,
so summing their losses and using Adam (a per-coordinate method) is the same as training each
on its own.

With prototypes p_j = -b_j / w_j and hidden responses H_ij = exp(-(w_j x_i + b_j)^2):

- coverage (an attractor): L_cov = mean_i [-tau log sum_j exp(-(x_i - p_j)^2 / tau)], a soft
  minimum squared distance from each sample to its nearest prototype;
- separation (repulsion between prototypes): L_sep = mean_{j<k} exp(-(p_j - p_k)^2 / tau);
- overlap (repulsion between hidden responses): L_ov = mean_{j!=k} mean_i H_ij H_ik. It is
  unnormalised, so it can be lowered by moving responses off the data.

The total is L = L_fit + lam * (m_c L_cov + m_s L_sep + m_o L_ov) with a binary mask m.

References:
    Alba and Lopez-Rubio, "From Latent Space to Training Data: Explainable Specialization in
    Minimal MLPs", arXiv 2605.25939, 2026. The loss forms are [inferred] from their names in
    the abstract (``../shared/docs/seed-briefs-2.md`` section 11).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.gaussian import GaussianMLP
from trainleak.progress import Progress, report_every

LOSS_NAMES: tuple[str, str, str] = ("coverage", "separation", "overlap")


def _per_replica(value: torch.Tensor | float, m: int, name: str) -> torch.Tensor:
    t = torch.as_tensor(value, dtype=torch.float32)
    if t.ndim == 0:
        t = t.expand(m)
    if t.shape != (m,) or not bool((t > 0).all()):
        raise ConfigError.invalid(name, f"a positive number or {m} positive numbers", value)
    return t


def coverage_loss(x: torch.Tensor, protos: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
    """Soft minimum squared distance from each sample to a prototype, averaged over samples.

    Args:
        x: samples, shape ``(M, n)``.
        protos: prototypes, shape ``(M, N)``.
        tau: temperature, a number or ``(M,)``.

    Returns:
        ``(M,)`` losses.
    """
    t = _per_replica(tau, x.shape[0], "tau").view(-1, 1, 1)
    d2 = (x.unsqueeze(-1) - protos.unsqueeze(1)) ** 2
    return (-t[:, :, 0] * torch.logsumexp(-d2 / t, dim=-1)).mean(-1)


def separation_loss(protos: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
    """Mean of exp(-(p_j - p_k)^2 / tau) over prototype pairs j < k (0 for a single prototype).

    Args:
        protos: prototypes, shape ``(M, N)``.
        tau: temperature, a number or ``(M,)``.

    Returns:
        ``(M,)`` losses.
    """
    m, n = protos.shape
    t = _per_replica(tau, m, "tau").view(-1, 1, 1)
    if n < 2:
        return protos.sum(-1) * 0.0
    d2 = (protos.unsqueeze(-1) - protos.unsqueeze(1)) ** 2
    off_diagonal = torch.exp(-d2 / t).sum((1, 2)) - n  # the diagonal terms are exp(0) = 1
    return off_diagonal / (n * (n - 1))


def overlap_loss(hidden: torch.Tensor) -> torch.Tensor:
    """Mean over neuron pairs j != k and samples i of H_ij H_ik (0 for a single neuron).

    Args:
        hidden: responses ``H``, shape ``(M, n, N)``.

    Returns:
        ``(M,)`` losses.
    """
    _, n, k = hidden.shape
    if k < 2:
        return hidden.sum((1, 2)) * 0.0
    pair_sums = hidden.sum(-1) ** 2 - (hidden**2).sum(-1)
    return pair_sums.sum(-1) / (n * k * (k - 1))


def structural_losses(
    model: GaussianMLP,
    x: torch.Tensor,
    tau: torch.Tensor | float,
    hidden: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The three structural losses of every replica on its data ``x`` (shape ``(M, n)``).

    Args:
        model: the replicas.
        x: inputs, ``(M, n)``.
        tau: temperature, a number or ``(M,)``.
        hidden: ``model.hidden(x)`` when the caller has it already.
    """
    protos = model.prototypes()
    return {
        "coverage": coverage_loss(x, protos, tau),
        "separation": separation_loss(protos, tau),
        "overlap": overlap_loss(model.hidden(x) if hidden is None else hidden),
    }


@dataclass
class PrototypeTraining:
    """Per-replica outcome of :func:`train_prototype_mlp`.

    Attributes:
        fit_mse: final mean squared error of the fit, ``(M,)``.
        losses: final value of each structural loss, name -> ``(M,)``.
        trace: ``{"step", "loss"}`` records (loss summed over replicas).
        seconds: wall time.
    """

    fit_mse: torch.Tensor
    losses: dict[str, torch.Tensor]
    trace: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0


def _check_inputs(model: GaussianMLP, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> None:
    m = model.n_models
    if x.ndim != 2 or x.shape[0] != m or y.shape != x.shape:
        raise ShapeError(
            f"x and y must both have shape (n_models={m}, n), received {tuple(x.shape)} and "
            f"{tuple(y.shape)}"
        )
    if mask.shape != (m, len(LOSS_NAMES)):
        raise ShapeError(
            f"mask must have shape ({m}, 3) (columns {list(LOSS_NAMES)}), received "
            f"{tuple(mask.shape)}"
        )


def train_prototype_mlp(
    model: GaussianMLP,
    x: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    *,
    lam: float = 0.1,
    tau: torch.Tensor | float = 0.01,
    steps: int = 3000,
    lr: float = 1e-2,
    log_every: int = 100,
    progress: Progress | None = None,
) -> PrototypeTraining:
    """Train every replica with full-batch Adam on L_fit + lam * (mask . structural losses).

    Args:
        model: the replicas, trained in place.
        x: inputs, ``(M, n)``, one data set per replica.
        y: targets, ``(M, n)``.
        mask: ``(M, 3)`` weights of (coverage, separation, overlap), usually 0/1.
        lam: the regularisation weight.
        tau: temperature of coverage and separation, a number or ``(M,)``.
        steps: Adam steps.
        lr: Adam's learning rate.
        log_every: steps between trace records.
        progress: optional progress callback.

    Returns:
        A :class:`PrototypeTraining` with per-replica fit error and structural losses.

    Raises:
        ShapeError: when ``x``, ``y`` or ``mask`` do not match the replicas.
        ConfigError: for a negative ``lam``, ``steps`` < 0, a non-positive ``lr`` or ``tau``.
    """
    _check_inputs(model, x, y, mask)
    if lam < 0 or steps < 0 or not lr > 0 or log_every < 1:
        raise ConfigError.invalid(
            "lam/steps/lr/log_every",
            "lam >= 0, steps >= 0, lr > 0, log_every >= 1",
            (lam, steps, lr, log_every),
        )
    tau_t = _per_replica(tau, model.n_models, "tau")
    active = [torch.nonzero(mask[:, k]).flatten() for k in range(len(LOSS_NAMES))]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    trace: list[dict[str, float]] = []
    start = time.perf_counter()
    for step in range(steps + 1):
        hidden = model.hidden(x)
        out = (hidden * model.v.unsqueeze(1)).sum(-1) + model.c.unsqueeze(1)
        fit = ((out - y) ** 2).mean(-1)
        reg = _masked_regulariser(model, x, hidden, mask, tau_t, active)
        total = (fit + lam * reg).sum()
        if step % log_every == 0 or step == steps:
            trace.append({"step": float(step), "loss": float(total.detach())})
            report_every(progress, "prototype training", step, steps, log_every)
        if step == steps:
            break
        opt.zero_grad(set_to_none=True)
        total.backward()
        opt.step()
    with torch.no_grad():
        parts = structural_losses(model, x, tau_t)
    return PrototypeTraining(
        fit_mse=fit.detach(),
        losses=parts,
        trace=trace,
        seconds=time.perf_counter() - start,
    )


def _masked_regulariser(
    model: GaussianMLP,
    x: torch.Tensor,
    hidden: torch.Tensor,
    mask: torch.Tensor,
    tau: torch.Tensor,
    active: list[torch.Tensor],
) -> torch.Tensor:
    """sum_k mask[:, k] * loss_k, computing each loss only on the replicas that use it."""
    protos = model.prototypes()
    reg = torch.zeros(model.n_models)
    for k, idx in enumerate(active):
        if idx.numel() == 0:
            continue
        if k == 0:
            part = coverage_loss(x[idx], protos[idx], tau[idx])
        elif k == 1:
            part = separation_loss(protos[idx], tau[idx])
        else:
            part = overlap_loss(hidden[idx])
        reg = reg.index_add(0, idx, mask[idx, k] * part)
    return reg
