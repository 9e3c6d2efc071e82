"""Images and figures of ``distillation-leakage``: distilled sets, recovered images beside their
sources, confusion matrices of the revelation, ROC curves of membership (display only: no claim
reads them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from trainleak.experiments.distillation_leakage_claims import RevelationRow
from trainleak.metrics.membership import membership_roc


def tile(images: torch.Tensor, cols: int, pad: int = 1) -> np.ndarray:
    """Tile ``(n, C, H, W)`` images in ``[0, 1]`` row-major into one uint8 picture; images
    smaller than 32 pixels a side are enlarged by pixel repetition for display."""
    x = images.detach().cpu().float().clamp(0, 1)
    factor = max(1, 32 // int(x.shape[-1]))
    x = x.repeat_interleave(factor, dim=2).repeat_interleave(factor, dim=3)
    n, c, h, w = x.shape
    rows = -(-n // cols)
    out = np.ones((rows * (h + pad) + pad, cols * (w + pad) + pad, c), dtype=np.float32)
    for i in range(n):
        r, q = divmod(i, cols)
        top, left = pad + r * (h + pad), pad + q * (w + pad)
        out[top : top + h, left : left + w] = x[i].permute(1, 2, 0).numpy()
    pic = (out * 255).round().astype(np.uint8)
    return pic[..., 0] if c == 1 else pic


def pairs(sources: torch.Tensor, recovered: torch.Tensor, cols: int = 10) -> np.ndarray:
    """Each source image above the synthetic image matched to it, ``cols`` pairs per row."""
    n = len(sources)
    blocks = []
    for start in range(0, n, cols):
        blocks.append(sources[start : start + cols])
        blocks.append(recovered[start : start + cols])
        if len(blocks[-1]) < cols:
            fill = torch.ones(cols - len(blocks[-1]), *sources.shape[1:])
            blocks[-2] = torch.cat([blocks[-2], fill])
            blocks[-1] = torch.cat([blocks[-1], fill])
    return tile(torch.cat(blocks), cols)


def confusion_figure(rows: Sequence[RevelationRow]) -> Figure:
    """Confusion matrices (true vs predicted) of the algorithm and the architecture."""
    fig = Figure(figsize=(9, 4))
    for ax, field in zip(fig.subplots(1, 2), ("algorithm", "architecture")):
        labels = sorted(
            {getattr(r, field) for r in rows} | {getattr(r, f"predicted_{field}") for r in rows}
        )
        m = np.zeros((len(labels), len(labels)), dtype=int)
        for r in rows:
            m[labels.index(getattr(r, field)), labels.index(getattr(r, f"predicted_{field}"))] += 1
        ax.imshow(m, cmap="Blues")
        for (i, j), v in np.ndenumerate(m):
            ax.text(j, i, str(v), ha="center", va="center")
        ax.set_xticks(range(len(labels)), labels, rotation=30)
        ax.set_yticks(range(len(labels)), labels)
        ax.set(title=f"{field} (true rows, predicted columns)")
    fig.tight_layout()
    return fig


def roc_figure(curves: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> Figure:
    """ROC curves (log-log) of each named (scores, is_member) pair."""
    fig = Figure(figsize=(5, 4.5))
    ax = fig.add_subplot(1, 1, 1)
    for name, (scores, member) in curves.items():
        fpr, tpr = membership_roc(scores, member)
        ax.loglog(np.maximum(fpr, 1e-4), np.maximum(tpr, 1e-4), label=name)
    ax.plot([1e-4, 1], [1e-4, 1], "k:", lw=0.8)
    ax.set(xlabel="false-positive rate", ylabel="true-positive rate", title="membership ROC")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
