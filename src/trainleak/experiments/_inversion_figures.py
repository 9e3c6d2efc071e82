"""Figures of the model-inversion experiments (display only: no claim reads them): per class,
the best reconstructions beside real private images; per-defense bars of attack accuracy; the
robustness-versus-leakage scatter; a grid of prior samples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from trainleak.experiments._distillation_figures import tile
from trainleak.experiments.model_inversion_claims import AttackRow, RelianceRow, TargetRow


def class_grid(
    recon: torch.Tensor,
    labels: torch.Tensor,
    real_x: torch.Tensor,
    real_y: torch.Tensor,
    num_classes: int,
    per_class: int = 4,
) -> np.ndarray:
    """One row per class: ``per_class`` real private images, then ``per_class``
    reconstructions of that class."""
    rows = []
    blank = torch.ones(1, *recon.shape[1:])
    for k in range(num_classes):
        real = real_x[real_y == k][:per_class]
        rec = recon[labels == k][:per_class]
        fill = [
            t if len(t) == per_class else torch.cat([t, blank.repeat(per_class - len(t), 1, 1, 1)])
            for t in (real, rec)
        ]
        rows.append(torch.cat(fill))
    return tile(torch.cat(rows), 2 * per_class)


def prior_grid(samples: torch.Tensor, cols: int = 8) -> np.ndarray:
    """Samples of the generative prior."""
    return tile(samples, cols)


def bars_figure(rows: Sequence[AttackRow], evaluator: str = "standard") -> Figure:
    """Acc@1 per target, one bar per attack, with bootstrap intervals."""
    sel = [r for r in rows if r.evaluator == evaluator]
    targets = list(dict.fromkeys(r.target for r in sel))
    attacks = list(dict.fromkeys(r.attack for r in sel))
    fig = Figure(figsize=(max(6, len(targets) * 0.9), 4))
    ax = fig.subplots()
    width = 0.8 / max(len(attacks), 1)
    for i, a in enumerate(attacks):
        got = {r.target: r for r in sel if r.attack == a}
        xs = [j + i * width for j, t in enumerate(targets) if t in got]
        ys = [got[t].acc1 for t in targets if t in got]
        err = np.array(
            [
                [got[t].acc1 - got[t].acc1_lo, got[t].acc1_hi - got[t].acc1]
                for t in targets
                if t in got
            ]
        ).T
        ax.bar(xs, ys, width, yerr=err if len(ys) else None, label=a, capsize=2)
    if sel:
        ax.axhline(sel[0].chance, color="grey", ls=":", label="chance")
    ax.set_xticks(
        [j + width * (len(attacks) - 1) / 2 for j in range(len(targets))], targets, rotation=30
    )
    ax.set_ylabel(f"Acc@1 ({evaluator} evaluator)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def scatter_figure(targets: Sequence[TargetRow], rows: Sequence[AttackRow], attack: str) -> Figure:
    """Mean robust accuracy over the epsilon grid (x) against Acc@1 of ``attack`` under the
    standard evaluator (y)."""
    acc = {r.target: r.acc1 for r in rows if r.attack == attack and r.evaluator == "standard"}
    fig = Figure(figsize=(5, 4))
    ax = fig.subplots()
    for t in targets:
        if t.target in acc:
            ax.scatter(t.robust_mean, acc[t.target])
            ax.annotate(t.target, (t.robust_mean, acc[t.target]), fontsize=7)
    ax.set_xlabel("PGD robust accuracy, mean over the epsilon grid")
    ax.set_ylabel(f"Acc@1 of the {attack} attack")
    fig.tight_layout()
    return fig


def reliance_figure(rows: Sequence[RelianceRow]) -> Figure:
    """Per model, its reliance on the imperceptible cue of the two-cue task: one dot per seed
    and a bar at the mean (0: follows the visible cue, 1: the imperceptible one)."""
    targets = list(dict.fromkeys(r.target for r in rows))
    fig = Figure(figsize=(max(5, len(targets) * 0.9), 3.5))
    ax = fig.subplots()
    for j, t in enumerate(targets):
        vals = [r.reliance for r in rows if r.target == t]
        ax.bar(j, float(np.nanmean(vals)), 0.6, color="lightsteelblue")
        ax.scatter([j] * len(vals), vals, color="black", s=10, zorder=3)
    ax.set_xticks(range(len(targets)), targets, rotation=30)
    ax.set_ylabel("conflicts decided by the\nimperceptible cue")
    ax.set_ylim(0, 1.0)
    fig.tight_layout()
    return fig
