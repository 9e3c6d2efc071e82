"""Reconstruction from the initial and the final weights: parameter-change matching.

Gradient descent from theta_0 moves the parameters by a combination of per-sample gradients,
so the attack looks for n inputs whose gradients span the observed change (Tansley et al.
2026, the unified objective; Loo et al. 2024 for the NTK view):

    min_{X_hat, alpha} ||dtheta - sum_i alpha_i grad_theta f(theta_bar; x_hat_i)||^2 / ||dtheta||^2,

with dtheta = theta_T - theta_0. Eliminating alpha in closed form leaves the *projection
loss* (||dtheta||^2 - v^T K^{-1} v) / ||dtheta||^2, with K the Gram matrix of the candidate
gradients and v their inner products with dtheta (Iurada et al. 2026). For a two-layer network
both are computed from n x n blocks, never from the p-dimensional gradients themselves.

The *subspace-aware* attack uses one more exact fact: for a first layer trained by (S)GD on any
loss, dL/dW_1 = sum_i delta_i x_i^T, so every row of W_1T - W_1_0 lies in span{x_i}. It takes
the top right singular vectors V_s of that change and searches x_hat = V_s z inside them with
the last-layer projection loss; the unknowns fall from n d to n s (and the width a provable
recovery needs from about d n to s n, see :mod:`trainleak.bounds.random_features`).

References:
    Tansley, Makhlouf, Massart et al., "Efficient Techniques for Data Reconstruction, with
    Finite-Width Recovery Guarantees", arXiv 2605.06519, 2026.
    Iurada, Bombari, Tommasi and Mondelli, "A Law of Data Reconstruction for Random Features
    (and Beyond)", ICLR 2026, arXiv 2509.22214 (the projection loss).
    Loo, Hasani, Lechner, Amini and Rus, "Understanding Reconstruction Attacks with the Neural
    Tangent Kernel and Dataset Distillation", ICLR 2024.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.checkpoint.two_layer import TwoLayerChange
from trainleak.bounds.random_features import projection_loss
from trainleak.errors import ConfigError
from trainleak.progress import Progress, report_every
from trainleak.releases.checkpoint import Checkpoint
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param

Constraint = Literal["sphere", "none"]
Params = Literal["last", "all"]
LinearizeAt = Literal["init", "final"]
Source = Literal["first_layer_delta", "prior"]


@dataclass(frozen=True, kw_only=True)
class _Search(Attack[Checkpoint]):
    """Shared hyper-parameters and the projected-gradient loop of both attacks.

    Args:
        steps: Adam steps per restart.
        lr: Adam's initial learning rate on the search variables (cosine-annealed to 0 over
            ``steps``, so every restart settles in its basin) [inferred].
        restarts: independent random starts; the one with the lowest final loss is kept
            (chosen without ground truth).
        constraint: ``sphere`` re-projects every candidate to norm ``radius`` after each step
            (the random-feature theorem's setting); ``none`` leaves them free.
        radius: the sphere's radius; ``None`` means sqrt(d).
        init_std: standard deviation per input coordinate of the random starts.
        ridge: relative ridge added to the Gram matrix before solving.
        log_every: steps between trace records.
    """

    release_type: ClassVar[type[Checkpoint]] = Checkpoint
    requires: ClassVar[frozenset[str]] = frozenset({"input_shape", "n_records"})

    steps: int = param(2000, ge=0)
    lr: float = param(0.01, gt=0)
    restarts: int = param(3, ge=1)
    constraint: Constraint = param("none", choices=Constraint)
    radius: float | None = param(None, gt=0)
    init_std: float = param(1.0, gt=0)
    ridge: float = param(1e-9, ge=0)
    log_every: int = param(100, gt=0)

    def _search(
        self,
        n: int,
        d: int,
        basis: torch.Tensor | None,
        loss_fn: _LossFn,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> tuple[torch.Tensor, list[dict[str, float]], list[float]]:
        """Minimise ``loss_fn(z @ basis.T)`` over z (n x s) with Adam, best of the restarts.

        ``basis`` is an orthonormal ``(d, s)`` matrix, or ``None`` for the full space.
        """
        s = d if basis is None else int(basis.shape[1])

        def embed(z: torch.Tensor) -> torch.Tensor:
            return z if basis is None else z @ basis.T

        radius = self.radius if self.radius is not None else float(d) ** 0.5
        best: tuple[float, torch.Tensor, list[dict[str, float]]] | None = None
        finals: list[float] = []
        for r in range(self.restarts):
            z0 = torch.randn(n, s, generator=generator, dtype=torch.float64)
            z = (z0 * self.init_std * (d / s) ** 0.5).requires_grad_()
            if self.constraint == "sphere":
                with torch.no_grad():
                    z.mul_(radius / z.norm(dim=1, keepdim=True).clamp_min(1e-12))
            opt = torch.optim.Adam([z], lr=self.lr)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, self.steps))
            trace: list[dict[str, float]] = []
            for step in range(self.steps + 1):
                loss = loss_fn(embed(z))
                if step % self.log_every == 0 or step == self.steps:
                    trace.append({"step": float(step), "loss": float(loss.detach())})
                    report_every(progress, f"{self.name} restart {r}", step, self.steps, 1)
                if step == self.steps:
                    break
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                if self.constraint == "sphere":
                    with torch.no_grad():
                        z.mul_(radius / z.norm(dim=1, keepdim=True).clamp_min(1e-12))
            finals.append(trace[-1]["loss"])
            if best is None or finals[-1] < best[0]:
                best = (finals[-1], embed(z).detach(), trace)
        if best is None:
            raise RuntimeError("internal invariant violated: best is not None")
        return best[1], best[2], finals


class _LossFn:
    """A callable candidates -> projection loss, with a readable repr."""

    def __init__(self, net: TwoLayerChange, params: str, at: str, ridge: float) -> None:
        self.net, self.params, self.at, self.ridge = net, params, at, ridge

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        gram, v, delta_sq = self.net.gram_and_inner(x, params=self.params, at=self.at)
        return projection_loss(gram, v, delta_sq, ridge=self.ridge)

    def __repr__(self) -> str:
        return f"ProjectionLoss(params={self.params!r}, linearize_at={self.at!r})"


def _input_dim(knowledge: Knowledge, net: TwoLayerChange) -> int:
    shape = tuple(knowledge.input_shape or ())
    d = 1
    for s in shape:
        d *= int(s)
    if d != net.input_dim:
        raise ConfigError.invalid(
            "Knowledge.input_shape",
            f"a shape with {net.input_dim} values (the first layer's input size)",
            shape,
        )
    return d


@register_attack
@dataclass(frozen=True, kw_only=True)
class ParameterChangeMatching(_Search):
    """Full-space parameter-change matching (the unified objective of Tansley et al. 2026).

    Args:
        params: ``last`` matches the change of the last layer only, with features
            sigma(W_1 x + b_1) (the random-feature form); ``all`` matches the change of every
            parameter with the network's Jacobian.
        linearize_at: take the gradients at ``init`` (theta_0: the NTK / Loo et al. form) or
            ``final`` (theta_T).
        **kwargs: the search settings of ``_Search`` (steps, lr, restarts, constraint, ...).

    Example:
        >>> ParameterChangeMatching(params="all", steps=10).params
        'all'
    """

    name: ClassVar[str] = "init-final"
    summary: ClassVar[str] = (
        "Parameter-change matching: inputs whose gradients span theta_T - theta_0, by the "
        "projection loss (Tansley et al. 2026; Iurada et al. 2026)"
    )

    params: Params = param("last", choices=Params)
    linearize_at: LinearizeAt = param("final", choices=LinearizeAt)

    def run(
        self,
        release: Checkpoint,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        net = TwoLayerChange.from_checkpoint(release)
        d, n = _input_dim(knowledge, net), int(knowledge.n_records or 0)
        loss_fn = _LossFn(net, self.params, self.linearize_at, self.ridge)
        x, trace, finals = self._search(n, d, None, loss_fn, generator, progress)
        return Reconstruction(
            inputs=x.float().reshape(n, *tuple(knowledge.input_shape or ())),
            diagnostics={
                "loss_final": min(finals),
                "restart_losses": finals,
                "unknowns": n * d,
                "objective": repr(loss_fn),
            },
            trace=trace,
        )


@register_attack
@dataclass(frozen=True, kw_only=True)
class SubspaceParameterMatching(_Search):
    """Subspace-aware reconstruction: search inside the span of the first-layer change.

    Steps: SVD of W_1T - W_1_0 (or of ``Knowledge.prior`` samples when the first layer is not
    trained, e.g. random features); keep the top s right singular vectors capturing
    ``energy`` of the squared singular values (s <= ``max_dim``, default n); minimise the
    last-layer projection loss over x_hat = V_s z. The energy rule and the use of the final
    first layer for the features are [inferred] from the brief.

    Args:
        energy: share of the squared singular values the subspace keeps, in (0, 1].
        max_dim: cap on s (``None``: the number of records n, since rank dW_1 <= n).
        source: ``first_layer_delta`` or ``prior`` (the span of public samples).
        linearize_at: first-layer weights used for the features (``final`` or ``init``).
        **kwargs: the search settings of ``_Search``.

    Example:
        >>> SubspaceParameterMatching(energy=0.95).energy
        0.95
    """

    name: ClassVar[str] = "init-final-subspace"
    summary: ClassVar[str] = (
        "Subspace-aware parameter-change matching: data subspace from the first-layer weight "
        "change, last-layer projection loss inside it (Tansley et al. 2026)"
    )

    energy: float = param(0.99, gt=0, le=1)
    max_dim: int | None = param(None, ge=1)
    source: Source = param("first_layer_delta", choices=Source)
    linearize_at: LinearizeAt = param("final", choices=LinearizeAt)

    def subspace(self, net: TwoLayerChange, knowledge: Knowledge) -> tuple[torch.Tensor, float]:
        """The orthonormal basis V_s ``(d, s)`` and the energy share it captures."""
        if self.source == "prior":
            if knowledge.prior is None:
                raise ConfigError.invalid(
                    "source", "'first_layer_delta' unless Knowledge.prior is set", self.source
                )
            mat = knowledge.prior.reshape(len(knowledge.prior), -1).double()
        else:
            mat = net.first_layer_delta()
        _, sv, vh = torch.linalg.svd(mat, full_matrices=False)
        share = torch.cumsum(sv**2, 0) / (sv**2).sum().clamp_min(1e-300)
        cap = self.max_dim if self.max_dim is not None else int(knowledge.n_records or 1)
        s = min(int((share < self.energy - 1e-12).sum()) + 1, cap, len(sv))
        if float(sv[0]) == 0.0:
            raise ConfigError(
                f"the {self.source} matrix is zero, so it spans no subspace; a first layer "
                "that training did not change (random features) needs source='prior'"
            )
        return vh[:s].T.contiguous(), float(share[s - 1])

    def run(
        self,
        release: Checkpoint,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        net = TwoLayerChange.from_checkpoint(release)
        d, n = _input_dim(knowledge, net), int(knowledge.n_records or 0)
        basis, captured = self.subspace(net, knowledge)
        loss_fn = _LossFn(net, "last", self.linearize_at, self.ridge)
        x, trace, finals = self._search(n, d, basis, loss_fn, generator, progress)
        return Reconstruction(
            inputs=x.float().reshape(n, *tuple(knowledge.input_shape or ())),
            diagnostics={
                "loss_final": min(finals),
                "restart_losses": finals,
                "subspace_dim": int(basis.shape[1]),
                "energy_captured": captured,
                "unknowns": n * int(basis.shape[1]),
                "objective": repr(loss_fn),
            },
            trace=trace,
        )
