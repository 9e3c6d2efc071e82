"""Experiment ``gaussian-prototypes``: prototype reconstruction in minimal Gaussian MLPs (seed 11).

One-hidden-layer Gaussian-activation MLPs of width N are trained on N points x ~ U[0, 1] with
targets sin(2 pi x) (or random labels), under the plain fit and the 7 other masks of the
coverage / separation / overlap losses. Each trained network is released as a checkpoint and
reconstructed by the prototype read-out (:class:`PrototypeReconstruction`); the study reports
the Hungarian-matched error, the specialisation ratio, the fit error and the share of
prototypes expelled outside the data's convex hull, then a temperature sweep of the
separation-only variant and the prototype positions at the largest N.

All seeds, masks (and, at the largest N, temperatures) of one N train together as replicas of
one batched model (:class:`GaussianMLP`); replicas share nothing, so this equals separate runs.

References:
    Alba and Lopez-Rubio, "From Latent Space to Training Data: Explainable Specialization in
    Minimal MLPs", arXiv 2605.25939, 2026.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
from matplotlib.figure import Figure
from pydantic import Field

from trainleak.attacks.checkpoint.prototypes import PrototypeReconstruction
from trainleak.experiments.base import ExperimentConfig, Result, evaluate_claims, experiment
from trainleak.experiments.prototype_claims import (
    CLAIMS,
    MASK_NAMES,
    MASKS,
    RunRow,
    main_rows,
    mask_name,
    risk_of,
    summary,
    sweep_rows,
)
from trainleak.metrics.prototypes import (
    grid_candidates,
    hull_escape_fraction,
    matched_error,
    specialization_ratio,
    specific_matches,
)
from trainleak.models.gaussian import GaussianMLP
from trainleak.models.registry import model_spec
from trainleak.progress import Progress
from trainleak.releases import Checkpoint, Knowledge
from trainleak.systems.training.prototypes import train_prototype_mlp


class PrototypeConfig(ExperimentConfig):
    """Config of ``gaussian-prototypes``; the defaults are the full 480-run study."""

    sizes: list[int] = Field(default_factory=lambda: [3, 5, 10, 20, 50, 100])
    seeds: int = Field(10, ge=1, description="independent seeds per (mask, N)")
    steps: int = Field(3000, ge=1)
    lr: float = Field(1e-2, gt=0)
    lam: float = Field(0.1, ge=0)
    tau: float = Field(0.01, gt=0)
    tau_sweep: list[float] = Field(default_factory=lambda: [1e-3, 1e-2, 1e-1, 1.0])
    target: Literal["sine", "random"] = "sine"


def _group(cfg: PrototypeConfig, n: int) -> tuple[list[dict[str, Any]], torch.Tensor, torch.Tensor]:
    """The replicas trained together at size ``n``: their labels, masks and temperatures."""
    specs = [{"mask": m, "tau": cfg.tau, "seed": s} for m in MASKS for s in range(cfg.seeds)]
    if n == max(cfg.sizes):
        specs += [
            {"mask": (0, 1, 0), "tau": t, "seed": s, "sweep": True}
            for t in cfg.tau_sweep
            if t != cfg.tau
            for s in range(cfg.seeds)
        ]
    mask = torch.tensor([sp["mask"] for sp in specs], dtype=torch.float32)
    tau = torch.tensor([sp["tau"] for sp in specs], dtype=torch.float32)
    return specs, mask, tau


def _data(cfg: PrototypeConfig, n: int, seeds: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """One data set per seed (shared by every mask: the comparison is paired)."""
    xs, ys = [], []
    for s in range(cfg.seeds):
        g = torch.Generator().manual_seed(cfg.seed * 100_003 + n * 1009 + s)
        x = torch.rand(n, generator=g)
        y = torch.sin(2 * torch.pi * x) if cfg.target == "sine" else torch.randn(n, generator=g)
        xs.append(x)
        ys.append(y)
    idx = torch.tensor(seeds)
    return torch.stack(xs)[idx], torch.stack(ys)[idx]


def _train_size(
    cfg: PrototypeConfig, n: int, progress: Progress | None
) -> tuple[list[RunRow], np.ndarray, np.ndarray]:
    """Train every replica at size ``n``, release each, reconstruct it, score it."""
    specs, mask, tau = _group(cfg, n)
    x, y = _data(cfg, n, [sp["seed"] for sp in specs])
    model = GaussianMLP(n_hidden=n, n_models=len(specs))
    model.reset_parameters(torch.Generator().manual_seed(cfg.seed * 7919 + n))
    out = train_prototype_mlp(
        model, x, y, mask, lam=cfg.lam, tau=tau, steps=cfg.steps, lr=cfg.lr, progress=progress
    )
    attack, spec = PrototypeReconstruction(), model_spec("gaussian_mlp", n_hidden=n)
    knowledge = Knowledge(input_shape=(1,), value_range=(0.0, 1.0), n_records=n)
    runs = []
    grid = grid_candidates(n, knowledge.value_range or (0.0, 1.0))
    for i, sp in enumerate(specs):
        ckpt = Checkpoint(architecture=spec, final=model.replica_state(i))
        protos = attack(ckpt, knowledge, seed=cfg.seed).inputs[:, 0]
        err, _ = matched_error(x[i], protos)
        runs.append(
            RunRow(
                size=n,
                mask=mask_name(sp["mask"]),
                tau=sp["tau"],
                seed=sp["seed"],
                sweep=sp.get("sweep", False),
                err=err / float(x[i].max() - x[i].min()),
                sr=specialization_ratio(x[i], protos),
                outside_hull=hull_escape_fraction(x[i], protos),
                fit_mse=float(out.fit_mse[i]),
                recovered=specific_matches(x[i], protos),
                grid_recovered=specific_matches(x[i], grid),
            )
        )
    pos = model.prototypes().detach().numpy()
    return runs, x.numpy(), pos


@experiment(
    "gaussian-prototypes",
    "Prototype reconstruction in minimal Gaussian-activation MLPs under coverage, separation "
    "and overlap losses (Alba and Lopez-Rubio 2026)",
    PrototypeConfig,
)
def run(cfg: PrototypeConfig, progress: Progress | None = None) -> Result:
    """Train all (N, mask, seed) runs, reconstruct, summarise, and check the seed's claims."""
    runs: list[RunRow] = []
    positions: dict[str, Any] = {}
    for k, n in enumerate(sorted(cfg.sizes)):
        size_runs, x, pos = _train_size(cfg, n, None)
        runs += size_runs
        if n == max(cfg.sizes):
            positions = {"x": x, "pos": pos, "runs": size_runs}
        if progress is not None:
            progress("gaussian-prototypes sizes", k + 1, len(cfg.sizes))
    main = main_rows(runs, cfg)
    res = Result(experiment="gaussian-prototypes", config=cfg.model_dump())
    res.claims = evaluate_claims(CLAIMS, runs, cfg)
    res.risk = risk_of(runs, cfg)
    res.metrics = {"runs_main": len(main), "runs_tau_sweep_extra": len(runs) - len(main)}
    table, sweep_table = summary(main), summary(sweep_rows(runs))
    res.tables = {"error, SR, fit and hull escape per (N, mask)": table, "tau sweep": sweep_table}
    res.figures.update(_figures(table, sweep_table, positions))
    res.notes = _NOTES
    return res


def _by(table: list[dict[str, Any]], n: int, mask: str) -> dict[str, Any]:
    return next(r for r in table if r["N"] == n and r["mask"] == mask)


def _figures(
    table: list[dict[str, Any]], sweep: list[dict[str, Any]], positions: dict[str, Any]
) -> dict[str, Figure]:
    sizes = sorted({r["N"] for r in table})
    fig = Figure(figsize=(11, 3.4))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    for m in MASK_NAMES:
        ax1.loglog(sizes, [_by(table, n, m)["err_mean"] for n in sizes], marker="o", label=m)
        ax2.semilogx(sizes, [_by(table, n, m)["outside_hull_mean"] for n in sizes], marker="o")
    ax1.set(xlabel="N", ylabel="matched error / range", title="reconstruction error")
    ax1.legend(fontsize=6, ncol=2)
    ax2.set(xlabel="N", ylabel="share outside hull", title="prototypes expelled")
    ax3.semilogx(
        [r["tau"] for r in sweep],
        [r["outside_hull_mean"] for r in sweep],
        marker="o",
        label="outside hull",
    )
    ax3.semilogx(
        [r["tau"] for r in sweep], [r["err_mean"] for r in sweep], marker="s", label="error"
    )
    ax3.set(xlabel="tau", title=f"separation only, N={max(sizes)}")
    ax3.legend(fontsize=7)
    fig.tight_layout()
    return {"error_and_hull_vs_N": fig, "prototype_positions": _positions(positions)}


def _positions(positions: dict[str, Any]) -> Figure:
    """Training points and prototypes of the first seed, one row per single-loss regime."""
    fig = Figure(figsize=(8, 4))
    axes = fig.subplots(4, 1, sharex=True)
    runs, x, pos = positions["runs"], positions["x"], positions["pos"]
    for ax, m in zip(axes, ("baseline", "C", "S", "O")):
        i = next(k for k, r in enumerate(runs) if r.mask == m and not r.sweep and r.seed == 0)
        ax.plot(x[i], np.zeros_like(x[i]), "|", color="black", ms=12, label="training x")
        ax.plot(pos[i], np.full_like(pos[i], 0.5), "o", ms=3, color="tab:red", label="prototypes")
        ax.axvspan(float(x[i].min()), float(x[i].max()), color="grey", alpha=0.15)
        ax.set_ylim(-0.5, 1.0)
        ax.set_yticks([])
        ax.set_ylabel(m, rotation=0, labelpad=25)
    axes[0].legend(fontsize=7, loc="upper right")
    axes[0].set_title(f"prototype positions at N = {len(x[0])} (hull shaded)")
    lo = min(float(pos[0].min()), -0.5)
    axes[-1].set_xlim(max(lo, -3.0), 4.0 if float(pos.max()) > 1.5 else 1.5)
    fig.tight_layout()
    return fig


_NOTES = """Measured: for every N, loss mask and seed, a Gaussian MLP of width N is
trained (full-batch Adam) on its own x ~ U[0, 1] with y = sin(2 pi x), released as a
checkpoint, and reconstructed by reading its prototypes -b/w. err = mean |x_i - p_pi(i)| under
the Hungarian assignment, divided by the data range; SR = share of prototypes that are the
nearest one to some sample; outside_hull = share of prototypes outside [min x, max x];
fit_mse = final training MSE. [inferred] design decisions (the paper gives none): the loss
forms (coverage = soft-min squared distance, separation = Gaussian kernel between prototypes,
overlap = unnormalised mean product of hidden responses), 8 masks x 6 sizes x 10 seeds = 480
runs, initial prototypes on a jittered grid over [0, 1] with slopes U[5, 20], v ~ N(0, 1/N),
lambda = 0.1, tau = 0.01, Adam lr 1e-2, 3000 steps. The tau sweep (separation only, largest N)
adds runs beyond the 480. Claims compare masks by one-sided 95% confidence bounds on
seed-paired differences (every mask of one N and seed trains on the same data), not by
comparing means over 10 seeds; the fit comparison uses the geometric-mean ratio of fit MSEs."""
