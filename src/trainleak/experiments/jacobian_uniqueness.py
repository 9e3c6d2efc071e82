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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from matplotlib.figure import Figure
from pydantic import Field

from trainleak.bounds.jacobian import (
    batch_size_threshold,
    find_collision,
    leakage_metric,
    leakage_upper_bound,
    lower_lipschitz_estimate,
    nonuniqueness_certificate,
)
from trainleak.errors import ShapeError
from trainleak.experiments.base import (
    Claim,
    ClaimFn,
    ExperimentConfig,
    Result,
    claim,
    evaluate_claims,
    experiment,
    rows_table,
)
from trainleak.federated.data import load_pool
from trainleak.federated.functional import batch_gradient
from trainleak.models.registry import build_model, model_spec
from trainleak.progress import Progress

NOTES = """\
Measured: numerical rank of the FedSGD update Jacobian (float64, singular values above
max(shape) * eps * s_max), null-space dimension, and a collision found by a null-space step of
30% (softmax) or 3% (MLP, ReLU kinks) of |X| followed by Gauss-Newton, moving only pixels
strictly inside [0, 1] (so the witness is a valid batch) when that restricted null space is
non-empty, else unconstrained (collision_in_box says which); DLG (L-BFGS, labels
known) success = matched mean squared error < 1e-3 after Hungarian-free per-index matching (the
labels fix the order up to equal labels; we match by nearest sample). Leakage eps_p uses the
data diameter of the digits pool; c_a is the minimum gradient-difference ratio over same-label
pairs [inferred estimator]; poly(B) = B in the bound [inferred: the summary leaves it open].
"""


class JacobianConfig(ExperimentConfig):
    """Config of ``jacobian-uniqueness``."""

    batch_sizes: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 10, 12, 16, 24, 32])
    hidden: int = Field(16, ge=1)
    dlg_iterations: int = Field(100, ge=1)
    dlg_restarts: int = Field(3, ge=1)
    distortions: list[float] = Field(default_factory=lambda: [0.0, 0.1, 0.3, 1.0, 3.0])
    leakage_batch: int = Field(4, ge=1)


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


@dataclass(frozen=True)
class CriterionRow:
    """The rank criterion, a collision witness and DLG at one (model, batch size).

    ``sufficient`` is ``B p > d``; ``non_unique`` is ``rank < B p``. The collision fields are
    None when no null direction exists (in the data box or at all).
    """

    model: str
    d: int
    batch_size: int
    input_dim: int
    rank: int
    null_dim: int
    sufficient: bool
    non_unique: bool
    threshold: int
    collision_gap: float | None
    collision_distance: float | None
    collision_in_box: bool | None
    dlg_mse: float
    dlg_success: bool


@dataclass(frozen=True)
class LeakageRow:
    """DLG's empirical leakage at one distortion, beside the upper bound's parts."""

    relative_distortion: float
    delta: float
    eps_empirical: float
    bound: float
    batch_term: float
    distortion_term: float
    poly: float
    vacuous: bool
    c_a: float


Row = CriterionRow | LeakageRow


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
    c_a = lower_lipschitz_estimate(model, x[:200], y[:200], pairs=400, generator=gen)
    rows = []
    for rel in cfg.distortions:
        noise = [torch.randn(g.shape, generator=gen, dtype=g.dtype) for g in clean]
        nn_ = float(torch.sqrt(sum((z**2).sum() for z in noise)))  # type: ignore[arg-type]
        delta = rel * norm
        target = [g + delta * z / nn_ for g, z in zip(clean, noise)]
        _, traj = _dlg(model, x[:b], y[:b], cfg, target, gen)
        eps = leakage_metric(x[:b], traj, diameter)
        bound = leakage_upper_bound(b, delta, c_a, diameter)
        rows.append(LeakageRow(rel, delta, eps, bound.value, **bound.components, c_a=c_a))
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
    ax2.plot([r.delta for r in leak], [r.eps_empirical for r in leak], "o-", label="DLG")
    ax2.plot([r.delta for r in leak], [r.bound for r in leak], "s--", label="upper bound")
    ax2.set(title="leakage vs distortion", xlabel="Delta", ylabel="eps_p")
    ax2.legend()
    fig.tight_layout()
    return fig


def _criterion(rows: Sequence[Row]) -> list[CriterionRow]:
    return [r for r in rows if isinstance(r, CriterionRow)]


def _leakage(rows: Sequence[Row]) -> list[LeakageRow]:
    return [r for r in rows if isinstance(r, LeakageRow)]


def claim_rank_deficient_above(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """Above the counting threshold the Jacobian is rank-deficient."""
    above = [r for r in _criterion(rows) if r.sufficient]
    return claim(
        "If B p > d the update Jacobian is rank-deficient (the batch is not unique)",
        bool(above) and all(r.non_unique for r in above),
        cases=[(r.model, r.batch_size, r.rank) for r in above],
    )


def claim_full_rank_below(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """Below the counting threshold the Jacobian has full column rank."""
    below = [r for r in _criterion(rows) if not r.sufficient]
    return claim(
        "Below the threshold (B p <= d) the Jacobian has full column rank",
        all(not r.non_unique for r in below),
        exceptions=[
            (r.model, r.batch_size, r.rank, r.batch_size * r.input_dim)
            for r in below
            if r.non_unique
        ],
    )


def claim_collision_witness(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """Above the threshold a distinct batch with the same update is exhibited."""
    wit = [r for r in _criterion(rows) if r.sufficient and r.non_unique]
    return claim(
        "Above the threshold a second batch with the same update exists (relative update gap "
        "< 1e-6 at a relative distance > 1e-3)",
        bool(wit)
        and all(
            r.collision_gap is not None
            and r.collision_distance is not None
            and r.collision_gap < 1e-6
            and r.collision_distance > 1e-3
            for r in wit
        ),
        witnesses=[(r.model, r.batch_size, r.collision_gap, r.collision_distance) for r in wit],
    )


def claim_dlg_below_vs_above(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """DLG's success rate is higher below the threshold than above."""
    crit = _criterion(rows)
    ok_below = [r.dlg_success for r in crit if not r.sufficient]
    ok_above = [r.dlg_success for r in crit if r.sufficient]
    rate_b = sum(ok_below) / max(len(ok_below), 1)
    rate_a = sum(ok_above) / max(len(ok_above), 1)
    return claim(
        "DLG with known labels succeeds more often below the threshold than above it",
        rate_b > rate_a,
        success_below=rate_b,
        success_above=rate_a,
    )


def claim_leakage_decreases(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """DLG's leakage does not grow with the distortion (1e-3 slack)."""
    eps = [r.eps_empirical for r in _leakage(rows)]
    return claim(
        "Empirical leakage decreases as the distortion grows",
        all(a >= b - 1e-3 for a, b in zip(eps, eps[1:])),
        eps=eps,
    )


def claim_bound_holds(rows: Sequence[Row], cfg: JacobianConfig) -> Claim:
    """The leakage upper bound is above DLG's leakage at every distortion."""
    leak = _leakage(rows)
    return claim(
        "The leakage upper bound holds (bound >= empirical leakage at every Delta)",
        all(r.bound >= r.eps_empirical for r in leak),
        bound=[r.bound for r in leak],
        vacuous=[r.vacuous for r in leak],
    )


CLAIMS: tuple[ClaimFn, ...] = (
    claim_rank_deficient_above,
    claim_full_rank_below,
    claim_collision_witness,
    claim_dlg_below_vs_above,
    claim_leakage_decreases,
    claim_bound_holds,
)


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
    result.figures["criterion_and_leakage"] = _figure(rows, leak)
    result.metrics = {
        "threshold_softmax": batch_size_threshold(650, 64),
        "threshold_mlp": batch_size_threshold(
            64 * cfg.hidden + cfg.hidden + 10 * cfg.hidden + 10, 64
        ),
    }
    result.notes = NOTES
    return result
