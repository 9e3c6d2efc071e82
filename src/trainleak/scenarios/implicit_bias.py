"""The implicit-bias profile of a checkpoint: the measurable side of "weight specificity".

Seed 1 argues that what a checkpoint reveals depends on the optimizer's implicit bias: the l2
KKT condition pins every coordinate of theta, the spectral one pins singular subspaces, and the
l-infinity one leaves only a set of saturated coordinates and their signs. This module measures
that on any homogeneous-MLP checkpoint:

- ``linf_saturation``: fraction of coordinates within 1% of ||theta||_inf (-> 1 under Adam
  with epsilon -> 0 or Signum);
- ``spectral_flatness``: per weight matrix, sigma_min / sigma_max over the nonzero spectrum
  and the fraction of singular values within 10% of the largest (Muon flattens spectra);
- ``kkt_residuals``: given the training set, the best normalised KKT residual under each
  target (multipliers and target parameters optimised, inputs fixed);
- ``identifiability``: for tiny networks, the rank of the Jacobian of the target's equations
  with respect to (inputs, multipliers) at the true training set, against the unknown count.
"""

from __future__ import annotations

from typing import Any

import torch

from trainleak.attacks.checkpoint._network import ReleasedMLP
from trainleak.attacks.checkpoint.kkt import ADAM_FIT, KKTProblem, KKTReconstruction
from trainleak.attacks.checkpoint.targets import TARGETS, LInfTarget
from trainleak.releases.checkpoint import Checkpoint


def linf_saturation(ckpt: Checkpoint, tol: float = 0.01) -> float:
    """Fraction of parameters with |theta_j| >= (1 - tol) * ||theta||_inf."""
    return LInfTarget(ReleasedMLP.from_checkpoint(ckpt).parameters(), tol=tol).saturation()


def spectral_flatness(ckpt: Checkpoint, tol: float = 0.1) -> list[dict[str, float]]:
    """Per weight matrix: sigma_min/sigma_max and the fraction of sigma within ``tol`` of top."""
    rows = []
    for i, w in enumerate(ReleasedMLP.from_checkpoint(ckpt).weights):
        s = torch.linalg.svdvals(w.double())
        s = s[s > s[0] * 1e-12]
        rows.append(
            {
                "layer": float(i),
                "min_over_max": float(s[-1] / s[0]),
                "frac_near_top": float((s >= (1 - tol) * s[0]).double().mean()),
                "stable_rank": float((s**2).sum() / s[0] ** 2),
            }
        )
    return rows


def kkt_residual(
    ckpt: Checkpoint,
    x: torch.Tensor,
    y: torch.Tensor,
    target: str,
    *,
    steps: int = 500,
    relu_alpha: float = 1e4,
    seed: int = 0,
) -> float:
    """Best normalised KKT residual of the true training set under ``target``.

    Multipliers (and the target's own parameters) are optimised by Adam with the inputs fixed;
    a large ``relu_alpha`` makes the gate essentially the true ReLU derivative.
    """
    hp = KKTReconstruction(
        n_candidates=len(x),
        steps=steps,
        **ADAM_FIT | {"lr_lambda": 0.05, "lambda_min": 0.0},
        relu_alpha=relu_alpha,
        target=target,  # type: ignore[arg-type]
        log_every=steps,
    )
    net = ReleasedMLP.from_checkpoint(ckpt)
    gen = torch.Generator().manual_seed(seed)
    problem = KKTProblem(net, hp, target, None, gen, fixed_x=x, fixed_labels=y)
    trace = problem.optimise(None)
    return min(t["kkt"] for t in trace)


def kkt_identifiability(
    ckpt: Checkpoint, x: torch.Tensor, y: torch.Tensor, target: str
) -> dict[str, int]:
    """First-order identifiability count at the true training set (tiny networks only).

    Counts the independent equations the target imposes near the truth: the rank of the
    Jacobian of the equality part of the condition with respect to (inputs, multipliers),
    against the number of unknowns ``n * d + n``. For ``linf`` the equalities are only the
    coordinates off the saturated set (plus the scale); for ``l2`` and the spectral targets
    every coordinate is an equation.
    """
    released = ReleasedMLP.from_checkpoint(ckpt)
    theta = [p.detach().double() for p in released.parameters()]
    bias = released.first_bias
    net = ReleasedMLP(
        [w.double() for w in released.weights],
        None if bias is None else bias.double(),
        released.input_dim,
        released.out_dim,
    )
    n, d = x.shape[0], net.input_dim
    if n * d + n > 4000:
        raise ValueError(f"identifiability is for tiny problems; {n * d + n} unknowns is too many")
    signs = 2.0 * y.double() - 1.0
    keep = _equality_mask(theta, target)

    def equations(flat: torch.Tensor) -> torch.Tensor:
        xs, lam = flat[: n * d].view(n, d), flat[n * d :]
        params = [t.clone().requires_grad_(True) for t in theta]
        out = net.forward(xs, params, 1e4).squeeze(1)
        g = torch.autograd.grad((lam * signs * out).sum(), params, create_graph=True)
        return torch.cat([q.flatten() for q in g])[keep]

    flat = torch.cat([x.flatten(), torch.ones(n)]).double()
    jac = torch.autograd.functional.jacobian(equations, flat)
    rank = int(torch.linalg.matrix_rank(jac).item())
    return {"equations": int(keep.sum()), "rank": rank, "unknowns": n * d + n}


def _equality_mask(theta: list[torch.Tensor], target: str) -> torch.Tensor:
    if target != "linf":
        return torch.ones(sum(t.numel() for t in theta), dtype=torch.bool)
    sat = LInfTarget(theta)
    return ~torch.cat([m.flatten() for m in sat.on_set])


def implicit_bias_profile(
    ckpt: Checkpoint,
    x: torch.Tensor | None = None,
    y: torch.Tensor | None = None,
    *,
    residual_steps: int = 500,
) -> dict[str, Any]:
    """The whole profile; the residuals need the training set ``(x, y)`` (labels 0/1)."""
    out: dict[str, Any] = {
        "optimizer": ckpt.optimizer.name if ckpt.optimizer else None,
        "linf_saturation": linf_saturation(ckpt),
        "spectral_flatness": spectral_flatness(ckpt),
    }
    if x is not None and y is not None:
        out["kkt_residuals"] = {
            t: kkt_residual(ckpt, x, y, t, steps=residual_steps) for t in TARGETS
        }
    return out
