"""Scores of a reconstruction of split-learning traffic against the true inputs.

Rows that a defense made identical (an MDAV group within one step) cannot be told apart by
anyone, so a reconstruction is scored as a set per group: inside each group, reconstructions
are paired with true inputs by the assignment of least total squared error (Hungarian), then
every pair is scored. Outside groups (no defense) this is the identity pairing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from scipy.optimize import linear_sum_assignment

from trainleak.errors import ShapeError
from trainleak.metrics.image import ssim


@dataclass(frozen=True)
class ReconstructionScore:
    """Mean per-image MSE and SSIM of matched pairs."""

    mse: float
    ssim: float
    n: int


def match_within_groups(rec: torch.Tensor, truth: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """``rec`` re-ordered inside each group to best match ``truth`` (least squared error)."""
    if rec.shape != truth.shape or groups.shape != (rec.shape[0],):
        raise ShapeError(
            f"expects rec and truth of one shape and groups (n,), received {tuple(rec.shape)}, "
            f"{tuple(truth.shape)}, {tuple(groups.shape)}"
        )
    out = rec.clone()
    for gid in groups.unique():
        rows = torch.nonzero(groups == gid).flatten()
        if len(rows) < 2:
            continue
        cost = torch.cdist(truth[rows].reshape(len(rows), -1), rec[rows].reshape(len(rows), -1))
        r, c = linear_sum_assignment(cost.pow(2).double().numpy())
        out[rows[torch.as_tensor(r)]] = rec[rows[torch.as_tensor(c)]]
    return out


def score_reconstruction(
    rec: torch.Tensor, truth: torch.Tensor, groups: torch.Tensor | None = None, data_range: float = 1.0
) -> ReconstructionScore:
    """Mean MSE and SSIM over images, after matching within ``groups`` (if given)."""
    if groups is not None:
        rec = match_within_groups(rec, truth, groups)
    mse = float(((rec - truth) ** 2).reshape(len(rec), -1).mean(1).mean())
    s = float(ssim(rec, truth, data_range=data_range).mean())
    return ReconstructionScore(mse, s, int(len(rec)))


def transcript_groups(smashed: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    """``(N,)`` ids of identical rows within each step (the groups a defense formed)."""
    ids = torch.empty(len(step), dtype=torch.int64)
    offset = 0
    for t in step.unique():
        rows = torch.nonzero(step == t).flatten()
        _, inv = torch.unique(smashed[rows].reshape(len(rows), -1), dim=0, return_inverse=True)
        ids[rows] = inv + offset
        offset += int(inv.max()) + 1
    return ids
