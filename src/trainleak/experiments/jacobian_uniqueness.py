"""Experiment ``jacobian-uniqueness``: the update-Jacobian criterion on both sides of B = d / p.

Seed system 17 (Zhang & Chen, arXiv 2407.16735). On scikit-learn's digits (p = 64) for a
softmax regression (d = 650, so the counting threshold is B = 11) and an MLP 64-16-10
(d = 1210, threshold B = 19):

(a) the rank of ``J = dU / dvec(X)`` (float64, ``torch.func.jacrev``) and the null-space
    dimension ``B p - rank`` for each batch size;
(b) a constructive witness above the threshold: a second batch with the same update (null-space
    step plus Gauss-Newton), and the refusal below it where ``J`` has full column rank;
(c) DLG with known labels on each side of the threshold (success: matched MSE < 1e-3);
(d) leakage against distortion: Gaussian noise of norm Delta on the update, the empirical
    leakage ``eps_p`` of DLG's iterates, next to the upper bound with ``c_a`` estimated from
    sample pairs (the bound's batch polynomial is a free parameter, here ``poly(B) = B``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from matplotlib.figure import Figure

from trainleak.bounds.jacobian import (
    batch_size_threshold,
    certified_lower_lipschitz_softmax,
    find_collision,
    leakage_metric,
    leakage_upper_bound,
    lower_lipschitz_estimate,
    nonuniqueness_certificate,
)
from trainleak.errors import ShapeError
from trainleak.experiments.base import (
    Result,
    evaluate_claims,
    experiment,
    rows_table,
)
from trainleak.experiments.jacobian_uniqueness_claims import (
    CLAIMS,
    CriterionRow,
    JacobianConfig,
    LeakageRow,
    risk_of,
)
from trainleak.models.functional import batch_gradient
from trainleak.models.registry import build_model, model_spec
from trainleak.progress import Progress
from trainleak.systems.federated.data import load_pool

NOTES = """\
Measured: numerical rank of the FedSGD update Jacobian (float64, singular values above
max(shape) * eps * s_max), null-space dimension, and a collision found by a null-space step of
30% (softmax) or 3% (MLP, ReLU kinks) of |X| followed by Gauss-Newton, moving only pixels
strictly inside [0, 1] (so the witness is a valid batch) when that restricted null space is
non-empty, else unconstrained (collision_in_box says which); DLG (L-BFGS, labels
known) success = matched mean squared error < 1e-3 after Hungarian-free per-index matching (the
labels fix the order up to equal labels; we match by nearest sample). Leakage eps_p uses the
data diameter D of the digits pool; poly(B) = B in the bound [inferred: the summary leaves it
open]. The bound's c_a is certified for softmax regression over the data box [0, 1]^64:
|g(x) - g(x')| >= (1 - p_y(x)) |x - x'| / (1 + |x'|), with 1 - p_y bounded below by the exact
minima of the logit gaps over the box. The minimum gradient-difference ratio over 400 sampled
same-label pairs is also shown (bound_estimate): a minimum over samples overstates the infimum,
so that "bound" is an estimate, not a guarantee (here about 40 times the certified constant).
Claims changed for soundness: "B p > d implies rank-deficient" is removed (rank <= d < B p, a
tautology; the collision witness is the falsifiable form of non-uniqueness); the bound claim is
checked only where the certified bound is below 1, the largest possible leakage (at or above 1
it cannot fail), and is not tested when no distortion gets there; the distortion sweep reaches
300 |g| so that one does. Where the bound falls below 1 - sqrt(p) / D, the smallest leakage an
output in the box can have, every attack violates it: for large enough Delta the bound as
instantiated cannot hold (evidence lists such points). DLG below vs above compares a one-sided
95% lower bound on the difference of success rates (Newcombe, Wilson score) with 0.
"""


def _models(hidden: int) -> dict[str, torch.nn.Module]:
    out = {}
    for name, h in (("softmax", []), ("mlp", [hidden])):
        spec = model_spec("mlp", input_shape=(64,), hidden=h, out_dim=10)
        out[name] = build_model(spec, seed=0).to(torch.float64)
    return out


def _dlg_once(
    model: torch.nn.Module,
    y: torch.Tensor,
    target: list[torch.Tensor],
    xs: torch.Tensor,
    iterations: int,
) -> list[torch.Tensor]:
    """L-BFGS gradient matching from ``xs``; iterates are projected onto [0, 1]."""
    params = list(model.parameters())
    xs = xs.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([xs], lr=1.0, max_iter=1, history_size=50)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xs), y)
        g = torch.autograd.grad(loss, params, create_graph=True)
        dist = torch.stack([((a - b) ** 2).sum() for a, b in zip(g, target)]).sum()
        dist.backward()
        return dist

    traj = []
    for _ in range(iterations):
        opt.step(closure)
        with torch.no_grad():
            xs.clamp_(0.0, 1.0)
        traj.append(xs.detach().clone())
    return traj


def _dlg(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: JacobianConfig,
    target: list[torch.Tensor],
    gen: torch.Generator,
) -> tuple[float, list[torch.Tensor]]:
    """Best-of-restarts projected DLG with known labels: matched MSE and best trajectory."""
    best, traj_best = float("inf"), []
    for _ in range(cfg.dlg_restarts):
        start = torch.rand(x.shape, generator=gen, dtype=x.dtype)
        traj = _dlg_once(model, y, target, start, cfg.dlg_iterations)
        mse = float(torch.cdist(x, traj[-1]).min(1).values.pow(2).mean() / x.shape[1])
        if mse < best:
            best, traj_best = mse, traj
    return best, traj_best


def _witness(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, step: float, gen: torch.Generator
) -> dict[str, Any]:
    """A colliding batch inside [0, 1] if the in-box null space allows, else unconstrained."""
    for box in ((0.0, 1.0), None):
        try:
            col = find_collision(model, x, y, step=step, box=box, generator=gen)
        except ShapeError:  # no null direction (inside the box, or at all)
            continue
        return {
            "collision_gap": col.update_gap,
            "collision_distance": col.distance,
            "collision_in_box": bool((col.x >= 0).all() and (col.x <= 1).all()),
        }
    return {"collision_gap": None, "collision_distance": None, "collision_in_box": None}


def _threshold_rows(cfg: JacobianConfig, x: torch.Tensor, y: torch.Tensor) -> list[CriterionRow]:
    rows = []
    gen = torch.Generator().manual_seed(cfg.seed)
    for name, model in _models(cfg.hidden).items():
        for b in cfg.batch_sizes:
            rep = nonuniqueness_certificate(model, x[:b], y[:b])
            wit = _witness(model, x[:b], y[:b], 0.3 if name == "softmax" else 0.03, gen)
            target = list(batch_gradient(model, x[:b], y[:b]).values())
            mse, _ = _dlg(model, x[:b], y[:b], cfg, target, gen)
            rows.append(
                CriterionRow(
                    model=name,
                    **dataclasses.asdict(rep),
                    **wit,
                    dlg_mse=mse,
                    dlg_success=mse < 1e-3,
                )
            )
    return rows


def _leakage_rows(cfg: JacobianConfig, x: torch.Tensor, y: torch.Tensor) -> list[LeakageRow]:
    model = _models(cfg.hidden)["softmax"]
    b = cfg.leakage_batch
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    clean = list(batch_gradient(model, x[:b], y[:b]).values())
    norm = float(torch.sqrt(sum((g**2).sum() for g in clean)))  # type: ignore[arg-type]
    diameter = float(torch.cdist(x, x).max())
    c_est = lower_lipschitz_estimate(model, x[:200], y[:200], pairs=400, generator=gen)
    w, bias = model.get_parameter("layers.0.weight"), model.get_parameter("layers.0.bias")
    c_a = certified_lower_lipschitz_softmax(w, bias, (0.0, 1.0))
    min_leakage = 1.0 - math.sqrt(x.shape[1]) / diameter  # the box [0, 1]^p has diameter sqrt(p)
    rows = []
    for rel in cfg.distortions:
        noise = [torch.randn(g.shape, generator=gen, dtype=g.dtype) for g in clean]
        nn_ = float(torch.sqrt(sum((z**2).sum() for z in noise)))  # type: ignore[arg-type]
        delta = rel * norm
        target = [g + delta * z / nn_ for g, z in zip(clean, noise)]
        _, traj = _dlg(model, x[:b], y[:b], cfg, target, gen)
        eps = leakage_metric(x[:b], traj, diameter)
        bound = leakage_upper_bound(b, delta, c_a, diameter)
        estimate = leakage_upper_bound(b, delta, c_est, diameter).value
        rows.append(
            LeakageRow(
                rel, delta, eps, bound.value, **bound.components, c_a=c_a, c_a_estimate=c_est,
                bound_estimate=estimate, min_leakage=min_leakage,
            )
        )  # fmt: skip
    return rows


def _figure(rows: list[CriterionRow], leak: list[LeakageRow]) -> Figure:
    fig = Figure(figsize=(10, 3.4))
    ax1, ax2 = fig.subplots(1, 2)
    for name in ("softmax", "mlp"):
        sel = [r for r in rows if r.model == name]
        ax1.plot([r.batch_size for r in sel], [r.null_dim for r in sel], "o-", label=name)
        ax1.axvline(sel[0].threshold, ls="--", color="grey")
    ax1.set(title="null-space dimension of J", xlabel="batch size B", ylabel="Bp - rank J")
    ax1.legend()
    deltas = [r.delta for r in leak]
    ax2.plot(deltas, [r.eps_empirical for r in leak], "o-", label="DLG")
    ax2.plot(deltas, [r.bound for r in leak], "s--", label="bound (certified c_a)")
    ax2.plot(deltas, [r.bound_estimate for r in leak], "x:", label="bound (estimated c_a)")
    ax2.axhline(1.0, color="grey", lw=0.8)
    positive = [d for d in deltas if d > 0]
    ax2.set_xscale("symlog", linthresh=min(positive, default=1.0))
    ax2.set_xlim(0.0, 1.5 * max(positive, default=1.0))
    ax2.set_ylim(min([r.min_leakage for r in leak], default=0.0) - 0.2, 2.0)
    ax2.set(title="leakage vs distortion", xlabel="Delta", ylabel="eps_p")
    ax2.legend()
    fig.tight_layout()
    return fig


@experiment(
    "jacobian-uniqueness",
    "Update-Jacobian rank criterion for batch uniqueness, a collision witness, and the "
    "leakage bound against distortion (seed 17)",
    JacobianConfig,
)
def run(cfg: JacobianConfig, progress: Progress | None = None) -> Result:
    """Measure the criterion on both sides of the threshold and state the seed's claims."""
    pool = load_pool("digits", n_public=10, seed=cfg.seed)
    x = pool.x.reshape(len(pool.x), -1).to(torch.float64)
    y = pool.y
    rows = _threshold_rows(cfg, x, y)
    if progress is not None:
        progress("jacobian-uniqueness", 1, 2)
    leak = _leakage_rows(cfg, x, y)
    result = Result(experiment="jacobian-uniqueness", config=cfg.model_dump())
    result.claims = evaluate_claims(CLAIMS, [*rows, *leak], cfg)
    result.tables["criterion"] = rows_table(rows)
    result.tables["leakage"] = rows_table(leak)
    result.risk = risk_of(rows, cfg)
    result.figures["criterion_and_leakage"] = _figure(rows, leak)
    result.metrics = {
        "threshold_softmax": batch_size_threshold(650, 64),
        "threshold_mlp": batch_size_threshold(
            64 * cfg.hidden + cfg.hidden + 10 * cfg.hidden + 10, 64
        ),
    }
    result.notes = NOTES
    return result
