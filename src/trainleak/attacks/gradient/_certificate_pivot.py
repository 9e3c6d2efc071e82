"""The pivot chain of the certificate, evaluated only where a sample has a coefficient.

The statement and the proof are those of :mod:`trainleak.attacks.gradient._certificate`; this
module computes the same chain faster. The dense formulation evaluates a bound for every free
sample in every row at every step, ``O(B m')`` work per step and ``O(B^2 m')`` in all; but a
sample's bound in a row where its coefficient is zero is infinite (its denominator
``|c_kr| - |E_b|`` is not positive), so only the pairs ``(k, r)`` with ``c_kr != 0`` can be
pivots. Through a malicious imprint layer each sample has one such row per group, so a step
costs ``O(B)``; on an honest network about the active fraction of the rows.

Per step the chain needs, for every row, the sum over free samples of their worst-case
contributions ``sup[i, r]`` with one term left out for the sample that holds the row's largest
(:func:`trainleak.attacks.gradient._certificate._others`): summed afresh over the free
samples' non-zero entries, never updated by subtraction. The running sums of the ordered
samples' proven moves are updated on the rows each new pivot touches. Sums taken in another
order than the dense code's differ in the last bits only; ties are broken the same way (first
sample, then first row), so the chain, its order and its certificate are the same (tested
against the dense reference on random cases and on the benchmark's batches). The loop runs on
NumPy views of the tensors: its steps are many small operations, where NumPy's per-call cost
is a tenth of PyTorch's.

References:
    Luby, Mitzenmacher, Shokrollahi, Spielman, *Efficient Erasure Correcting Codes*, IEEE
    Trans. Inf. Theory 47(2), 2001 (peeling orders on sparse codes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from trainleak.attacks.gradient._certificate import Chain
from trainleak.attacks.gradient._linearisation import Linearisation


class _FreeSums:
    """Per-row sums of ``sup`` over the free samples, with the row's largest term left out
    for the sample holding it, for the weight (``w``) and bias (``b``) columns."""

    def __init__(self, sup_w: np.ndarray, sup_b: np.ndarray) -> None:
        n, m = sup_w.shape
        rr, ii = np.nonzero(((sup_w > 0) | (sup_b > 0)).T)  # by row, then sample
        self.n, self.m, self.i = n, m, ii
        self.vals = (sup_w[ii, rr], sup_b[ii, rr])
        self.starts = np.flatnonzero(np.r_[True, rr[1:] != rr[:-1]]) if rr.size else rr
        self.rows = rr[self.starts]
        self.lengths = np.diff(np.r_[self.starts, rr.size])
        self.eps = float(np.finfo(sup_w.dtype).eps)

    def __call__(self, free: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per column, ``(total, without_top, top)`` over rows, rounded up (``top == n`` where
        no free sample holds a positive term)."""
        grow = 1 + 2 * int(free.sum()) * self.eps
        alive = free[self.i]
        out = []
        for vals in self.vals:
            total, rest = np.zeros(self.m), np.zeros(self.m)
            top = np.full(self.m, self.n)
            if self.starts.size:
                live = np.where(alive, vals, 0.0)
                peak = np.repeat(np.maximum.reduceat(live, self.starts), self.lengths)
                holder = np.where((live == peak) & (live > 0), self.i, self.n)
                tops = np.minimum.reduceat(holder, self.starts)
                total[self.rows] = np.add.reduceat(live, self.starts)
                mine = self.i == np.repeat(tops, self.lengths)
                rest[self.rows] = np.add.reduceat(np.where(mine, 0.0, live), self.starts)
                top[self.rows] = tops
            out.append((total * grow, rest * grow, top))
        return out


@dataclass
class _Arrays:
    """NumPy views of the linearisation (shared memory, float64)."""

    x: np.ndarray
    labels: np.ndarray
    probs: np.ndarray
    q: np.ndarray
    jpm: np.ndarray
    grad_norm: np.ndarray
    q_norm: np.ndarray
    m_norm: np.ndarray
    radius: np.ndarray

    @staticmethod
    def of(lin: Linearisation) -> _Arrays:
        def v(t: torch.Tensor) -> np.ndarray:
            return t.detach().contiguous().numpy()

        return _Arrays(
            *(
                v(t)
                for t in (
                    lin.x,
                    lin.labels,
                    lin.probs,
                    lin.q,
                    lin.jpm,
                    lin.grad_norm,
                    lin.q_norm,
                    lin.m_norm,
                    lin.radius,
                )
            )
        )


def _moves(
    a: _Arrays, pivot: tuple[int, int], parts: tuple[float, float], err: np.ndarray, col: np.ndarray
) -> np.ndarray:
    """Bound of ``|c_kr'(x'_k) - c_kr'(x_k)|`` for every row ``r'`` once ``k`` is pivoted in
    row ``r`` (``pivot = (k, r)``; ``parts`` = the pivot equation's own error and denominator;
    ``col`` = ``dev_c[:, r]``, the other ordered samples' coefficient moves in that row):
    ``grad c_kr' . (x'_k - x_k)`` with the pivot equation's terms, plus curvature."""
    k, r = pivot
    own, den = parts
    members = np.flatnonzero(col > 0)
    g = a.grad_norm[k]
    first = g * own
    if members.size:
        w = a.jpm[k] @ (a.x[members] - a.x[k]).T  # (C, |members|)
        along = np.abs(a.q[k].T @ w)  # (m', |members|)
        resid = a.probs[members].copy()
        resid[np.arange(members.size), a.labels[members]] -= 1.0
        c_i = np.abs((a.q[members, :, r] * resid).sum(1)) + col[members]
        first = first + along @ col[members] + g * float((c_i * err[members]).sum())
    ek = float(err[k])
    return first / den + 0.75 * a.q_norm[k] * float(a.m_norm[k]) ** 2 * ek**2


def _labels_ok(a: _Arrays, k: int, move: np.ndarray, e_b: np.ndarray) -> bool:
    """Whether every other label of sample ``k`` is excluded by some row.

    A label ``y'`` shifts ``c_k`` by the constant ``q_y - q_y'``; the true coefficient lies
    within ``e_b`` of the decoded one and moves by at most ``move`` inside the error ball.
    """
    q = a.q[k]
    y = int(a.labels[k])
    excluded = ((np.abs(q[y] - q) - move) > e_b).any(1)
    excluded[y] = True
    return bool(excluded.all())


def pivot_chain(
    lin: Linearisation,
    resid: torch.Tensor,
    slack: torch.Tensor,
    tol: float,
) -> Chain:
    """Order the samples by pivots and bound each one's error (see
    :mod:`trainleak.attacks.gradient._certificate` for the statement).

    For sample ``k`` in pivot row ``r``, with ``E`` every term of the row but ``k``'s own,
    ``c_k(x'_k) (x'_k - x_k) = E_w - x_k E_b``; an ordered member ``i`` contributes
    ``(c_i(x'_i) - c_i(x_i)) (x_i - x_k) + c_i(x'_i) (x'_i - x_i)`` to the right side. The
    coefficient errors ``|c_ir(x'_i) - c_ir(x_i)|`` of ordered samples are tracked row by row
    (:func:`_moves`), so a member's error
    along ``x_i - x_k`` is charged by its actual effect on the later rows. Each step picks the
    smallest bound over the free samples' non-zero pairs (first sample, then first row, on
    ties), as the dense formulation (``tests/reference_certificate.py``) does over all pairs.

    Args:
        lin: the samples' linearisation.
        resid: residual rows ``(m', d + 1)`` after subtracting every sample of ``lin``.
        slack: per-row bound ``(m', 2)`` of everything not modelled by ``lin`` (rounding).
        tol: samples whose bound exceeds ``tol`` stay off the chain.

    Returns:
        The :class:`~trainleak.attacks.gradient._certificate.Chain`.
    """
    a = _Arrays.of(lin)
    n = lin.n
    xn = lin.x.norm(dim=1).numpy()
    chat, curv = lin.coefficients().abs().numpy(), lin.curvature().numpy()
    qn = math.sqrt(2.0) * a.q_norm  # sup |c_ir| over the ball and every label
    sums = _FreeSums(qn * (xn + a.radius)[:, None], qn)
    res_w, res_b = resid[:, :-1].norm(dim=1).numpy(), resid[:, -1].abs().numpy()
    slack_w, slack_b = slack[:, 0].contiguous().numpy(), slack[:, 1].contiguous().numpy()
    dist = torch.cdist(lin.x, lin.x).numpy()
    dev_c, dev_v, s_dist = np.zeros_like(chat), np.zeros_like(chat), np.zeros_like(chat)
    dc_sum, dv_sum = np.zeros_like(res_b), np.zeros_like(res_b)
    free = np.ones(n, dtype=bool)
    err = np.full(n, math.inf)
    label_ok, order = np.zeros(n, dtype=bool), []
    pk, pr = np.nonzero(chat > 0)  # the only pairs with a finite bound, by sample then row
    while pk.size:
        (tw, rw, topw), (tb, rb, topb) = sums(free)
        t_w = slack_w[pr] + 2 * np.where(topw[pr] == pk, rw[pr], tw[pr])
        t_b = slack_b[pr] + 2 * np.where(topb[pr] == pk, rb[pr], tb[pr])
        e_b = res_b[pr] + t_b + dc_sum[pr]
        own = res_w[pr] + t_w + xn[pk] * (res_b[pr] + t_b)
        den = chat[pk, pr] - e_b
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(den > 0, (own + s_dist[pk, pr] + dv_sum[pr]) / den, math.inf)
        j = int(np.argmin(bound))
        k, ek, r = int(pk[j]), float(bound[j]), int(pr[j])
        if not math.isfinite(ek) or ek > tol or ek > float(a.radius[k]):
            break
        move = np.minimum(a.grad_norm[k] + curv[k] * ek, 0.5 * a.q_norm[k] * a.m_norm[k]) * ek
        e_bk = res_b + (slack_b + 2 * np.where(topb == k, rb, tb)) + dc_sum
        label_ok[k] = _labels_ok(a, k, move, e_bk)
        free[k] = False
        keep = pk != k
        pk, pr = pk[keep], pr[keep]
        if not label_ok[k]:
            continue  # stays unordered: its contribution is part of the others' leak
        err[k] = ek
        order.append(k)
        dev_c[k] = _moves(a, (k, r), (float(own[j]), float(den[j])), err, dev_c[:, r])
        dev_v[k] = (chat[k] + dev_c[k]) * ek
        cols = np.flatnonzero((dev_c[k] != 0) | (dev_v[k] != 0))
        s_dist[:, cols] += dist[:, k, None] * dev_c[k, cols][None, :]
        dc_sum[cols] += dev_c[k, cols]
        dv_sum[cols] += dev_v[k, cols]
    t = torch.from_numpy
    return Chain(order, t(err), t(label_ok), t(dev_c), t(dev_v))
