"""Certifying a rescaled update: the scale must be corroborated by two independent samples.

When the decoder fits a global rescaling ``s`` of the update (norm clipping), the true scale is
one more unknown: in per-sample units the rows read ``lambda R = sum_i c_i(x_i) (x_i, 1)`` with
``lambda = s_fitted / s_true``. A row holding one sample still gives its input scale-free
(``x = R_w / R_b``), but its bias entry only ties ``lambda`` to that sample's label:
``lambda = c_k(x_k, y_k) / R_b``. One row therefore cannot tell a rescaling from a wrong label
or from a mixture (the ambiguity behind certified mixtures with a tiny rescale). Two samples
``k1 != k2`` alone in their rows must agree on ``lambda``: every label pair ``(y1, y2)`` defines
two intervals of ``lambda``, and the fit is certified when only the decoded labels' intervals
meet. Their intersection bounds ``|lambda - 1|``, which then enters every row of the pivot
chain as ``|lambda - 1| ||R_r||``. The argument covers true scales within a factor 2 of the
fitted one (the rounding term is doubled for that).
"""

from __future__ import annotations

import math

import torch

from trainleak.attacks.gradient._certificate import _others
from trainleak.attacks.gradient._linearisation import Linearisation


def _lone_rows(
    lin: Linearisation, resid: torch.Tensor, slack: torch.Tensor
) -> list[tuple[int, int, float, float]]:
    """``(sample, row, position bound, bias error)`` of the two samples best isolated by a row
    of their own (every other sample's coefficient bounded as in the pivot chain)."""
    xn = lin.x.norm(dim=1)
    chat = lin.coefficients().abs()
    qn = math.sqrt(2.0) * lin.q.norm(dim=1)
    sup_w, sup_b = qn * (xn + lin.radius).unsqueeze(1), qn
    everyone, idx = torch.ones(lin.n, dtype=torch.bool), torch.arange(lin.n)
    t_w = 2 * slack[:, 0] + 2 * _others(sup_w, everyone, idx)
    t_b = 2 * slack[:, 1] + 2 * _others(sup_b, everyone, idx)
    e_b = resid[:, -1].abs() + t_b
    num = resid[:, :-1].norm(dim=1) + t_w + xn.unsqueeze(1) * (resid[:, -1].abs() + t_b)
    num = 2 * num  # residual terms scaled by lambda^-1 <= 2
    den = chat - e_b
    bound = torch.where(den > 0, num / den, math.inf)
    best, rows = bound.min(1)
    order = torch.argsort(best)[:2].tolist()
    return [(k, int(rows[k]), float(best[k]), float(e_b[k, rows[k]])) for k in order]


def _interval(
    lin: Linearisation, k: int, r: int, e_k: float, e_b: float, rb: float
) -> torch.Tensor:
    """Per label ``y``, the interval ``[lo, hi]`` of ``lambda`` allowed by sample ``k`` in row
    ``r`` (``rb`` the row's bias entry in per-sample units), ``(C, 2)``."""
    onehot = torch.eye(lin.probs.shape[1], dtype=lin.x.dtype)
    c = (lin.q[k, :, r].unsqueeze(0) * (lin.probs[k].unsqueeze(0) - onehot)).sum(1)  # (C,)
    move = float(lin.lipschitz(e_k)[k, r]) * e_k + e_b
    ends = torch.stack([(c - move) / rb, (c + move) / rb], dim=1)
    return torch.sort(ends, dim=1).values


def scale_error(
    lin: Linearisation, resid: torch.Tensor, slack: torch.Tensor, measured: torch.Tensor
) -> float | str:
    """Bound on ``|lambda - 1|``, or the reason the fitted scale is not corroborated."""
    lone = _lone_rows(lin, resid, slack)
    if len(lone) < 2 or not all(math.isfinite(b) for _, _, b, _ in lone):
        return "rescaled update: fewer than two samples alone in a row to corroborate the scale"
    (k1, r1, e1, b1), (k2, r2, e2, b2) = lone
    i1 = _interval(lin, k1, r1, e1, b1, float(measured[r1, -1]))
    i2 = _interval(lin, k2, r2, e2, b2, float(measured[r2, -1]))
    lo = torch.maximum(i1[:, 0].unsqueeze(1), i2[:, 0].unsqueeze(0))
    hi = torch.minimum(i1[:, 1].unsqueeze(1), i2[:, 1].unsqueeze(0))
    meet = (lo <= hi) & (hi >= 0.5) & (lo <= 2.0)  # (C, C) label pairs consistent
    y1, y2 = int(lin.labels[k1]), int(lin.labels[k2])
    if not bool(meet[y1, y2]) or int(meet.sum()) != 1:
        return "rescaled update: two independent rows do not pin the scale and labels"
    return max(abs(float(lo[y1, y2]) - 1.0), abs(float(hi[y1, y2]) - 1.0))
