"""Dense reference implementations of the certificate's and decoder's hot paths, kept for tests.

These are the formulations the library used before they were restricted to the non-zero pairs
(:mod:`trainleak.attacks.gradient._certificate_pivot`) or vectorised; the tests check that the
fast paths give the same results on random cases.
"""

from __future__ import annotations

import math

import torch

from trainleak.attacks.gradient._certificate import Chain, _coefficient_moves, _labels, _others
from trainleak.attacks.gradient._linearisation import Linearisation


def pivot_chain_dense(
    lin: Linearisation,
    resid: torch.Tensor,
    slack: torch.Tensor,
    tol: float,
) -> Chain:
    """Order the samples by pivots and bound each one's error (see the module docstring).

    For sample ``k`` in pivot row ``r``, with ``E`` every term of the row but ``k``'s own,
    ``c_k(x'_k) (x'_k - x_k) = E_w - x_k E_b``; an ordered member ``i`` contributes
    ``(c_i(x'_i) - c_i(x_i)) (x_i - x_k) + c_i(x'_i) (x'_i - x_i)`` to the right side. The
    coefficient errors ``|c_ir(x'_i) - c_ir(x_i)|`` of ordered samples are tracked row by row
    (:func:`_coefficient_moves`), so a member's error along ``x_i - x_k`` is charged by its
    actual effect on the later rows, not by the worst direction.

    Args:
        lin: the samples' linearisation.
        resid: residual rows ``(m', d + 1)`` after subtracting every sample of ``lin``.
        slack: per-row bound ``(m', 2)`` of everything not modelled by ``lin`` (rounding):
            column 0 for the weight part, column 1 for the bias entry.
        tol: samples whose bound exceeds ``tol`` stay off the chain.

    Returns:
        The :class:`Chain`.
    """
    n, xn = lin.n, lin.x.norm(dim=1)
    signed = lin.coefficients()
    chat, curv = signed.abs(), lin.curvature()
    qn = math.sqrt(2.0) * lin.q.norm(dim=1)  # sup |c_ir| over the ball and every label
    sup_w, sup_b = qn * (xn + lin.radius).unsqueeze(1), qn
    res_w, res_b = resid[:, :-1].norm(dim=1), resid[:, -1].abs()
    dist = torch.cdist(lin.x, lin.x)
    dev_c, dev_v = torch.zeros_like(chat), torch.zeros_like(chat)
    s_dist = torch.zeros_like(chat)  # sum_i dev_c[i, r] ||x_i - x_k||, per candidate k
    free = torch.ones(n, dtype=torch.bool)
    err = torch.full((n,), math.inf, dtype=resid.dtype)
    label_ok, order = torch.zeros(n, dtype=torch.bool), []
    while bool(free.any()):
        idx = torch.nonzero(free).squeeze(1)
        t_w = slack[:, 0] + 2 * _others(sup_w, free, idx)  # (k, m')
        t_b = slack[:, 1] + 2 * _others(sup_b, free, idx)
        e_b = res_b + t_b + dev_c.sum(0)  # bound of the bias coordinate's error
        own = res_w + t_w + xn[idx].unsqueeze(1) * (res_b + t_b)
        den = chat[idx] - e_b
        bound = torch.where(den > 0, (own + s_dist[idx] + dev_v.sum(0)) / den, math.inf)
        best, rows = bound.min(1)
        j = int(best.argmin())
        k, ek, r = int(idx[j]), float(best[j]), int(rows[j])
        if not math.isfinite(ek) or ek > tol or ek > float(lin.radius[k]):
            break
        region = 0.5 * lin.q[k].norm(dim=0) * lin.m_norm[k]
        move = (lin.grad_norm[k] + curv[k] * ek).minimum(region) * ek
        label_ok[k] = _labels(lin, k, move, e_b[j])
        free[k] = False
        if not bool(label_ok[k]):
            continue  # stays unordered: its contribution is part of the others' leak
        err[k] = ek
        order.append(k)
        dev_c[k] = _coefficient_moves(lin, (k, r), (float(own[j, r]), float(den[j, r])), err, dev_c)
        dev_v[k] = (chat[k] + dev_c[k]) * ek
        s_dist += dist[:, k].unsqueeze(1) * dev_c[k].unsqueeze(0)
    return Chain(order, err, label_ok, dev_c, dev_v)


