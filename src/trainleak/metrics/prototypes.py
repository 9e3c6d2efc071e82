"""Scoring one-dimensional prototypes against the training inputs (seed system 11).

Ground-truth measures for :class:`trainleak.attacks.checkpoint.prototypes.PrototypeReconstruction`:
the Hungarian-matched error, the specialisation ratio and the share of prototypes outside the
data's hull (Alba and Lopez-Rubio 2026).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from trainleak.errors import ShapeError


def matched_error(x: torch.Tensor, protos: torch.Tensor) -> tuple[float, torch.Tensor]:
    """Mean |x_i - p_pi(i)| under the Hungarian assignment of samples to prototypes.

    Args:
        x: ``(n,)`` training inputs.
        protos: ``(m,)`` prototypes, ``m >= n``.

    Returns:
        The mean matched absolute error and ``pi`` (``(n,)`` prototype indices).

    Raises:
        ShapeError: when there are fewer prototypes than samples.
    """
    xs, ps = x.reshape(-1).double(), protos.reshape(-1).double()
    if len(ps) < len(xs):
        raise ShapeError(f"need at least {len(xs)} prototypes, received {len(ps)}")
    cost = (xs.unsqueeze(1) - ps.unsqueeze(0)).abs().numpy()
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(len(xs), dtype=np.int64)
    perm[rows] = cols
    return float(cost[rows, cols].mean()), torch.from_numpy(perm)


def specialization_ratio(x: torch.Tensor, protos: torch.Tensor) -> float:
    """Share of prototypes that are the nearest prototype of at least one sample.

    SR = |{argmin_j |x_i - p_j| : i}| / m, with m the number of prototypes.
    """
    xs, ps = x.reshape(-1).double(), protos.reshape(-1).double()
    nearest = (xs.unsqueeze(1) - ps.unsqueeze(0)).abs().argmin(1)
    return float(nearest.unique().numel() / ps.numel())


def hull_escape_fraction(x: torch.Tensor, protos: torch.Tensor) -> float:
    """Share of prototypes outside the data's convex hull [min x, max x]."""
    xs, ps = x.reshape(-1).double(), protos.reshape(-1).double()
    outside = (ps < xs.min()) | (ps > xs.max())
    return float(outside.double().mean())


def specific_matches(x: torch.Tensor, protos: torch.Tensor) -> int:
    """Samples whose Hungarian-matched prototype is nearer to them than to every other sample:
    the prototype singles the sample out of the training set (the risk card's success rule)."""
    _, perm = matched_error(x, protos)
    xs = x.reshape(-1).double()
    matched = protos.reshape(-1).double()[perm]
    dist = (matched.unsqueeze(1) - xs.unsqueeze(0)).abs()  # [i, j]: i's prototype to sample j
    own = dist.diagonal().clone()
    dist.fill_diagonal_(float("inf"))
    return int((own < dist.min(1).values).sum())


def grid_candidates(n: int, value_range: tuple[float, float]) -> torch.Tensor:
    """The equal-budget baseline of a prototype read-out: ``n`` points evenly spaced over the
    declared value range (cell midpoints), which uses no training data."""
    lo, hi = value_range
    return lo + (hi - lo) * (torch.arange(n, dtype=torch.float64) + 0.5) / n
