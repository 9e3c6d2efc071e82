"""Dense reference implementations of the certificate's and decoder's hot paths, kept for tests.

These are the formulations the library used before they were restricted to the non-zero pairs
(:mod:`trainleak.attacks.gradient._certificate_pivot`) or vectorised; the tests check that the
fast paths give the same results on random cases.
"""

from __future__ import annotations

import math

import torch

from trainleak.attacks.gradient._certificate import Chain, _others
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


def _coefficient_moves(
    lin: Linearisation,
    pivot: tuple[int, int],
    parts: tuple[float, float],
    err: torch.Tensor,
    dev_c: torch.Tensor,
) -> torch.Tensor:
    """Bound of ``|c_kr'(x'_k) - c_kr'(x_k)|`` for every row ``r'`` once ``k`` is pivoted in
    row ``r`` (``pivot = (k, r)``; ``parts`` = the pivot equation's own error and denominator):
    ``grad c_kr' . (x'_k - x_k)`` with the pivot equation's terms, plus curvature."""
    k, r = pivot
    own, den = parts
    members = torch.nonzero(dev_c[:, r] > 0).squeeze(1)
    g = lin.grad_norm[k]
    first = g * own
    if members.numel():
        w = lin.jpm[k] @ (lin.x[members] - lin.x[k]).T  # (C, |members|)
        along = (lin.q[k].T @ w).abs()  # (m', |members|): |grad c_kr' . (x_i - x_k)|
        onehot = torch.nn.functional.one_hot(lin.labels[members], lin.probs.shape[1])
        c_i = torch.einsum("ic,ic->i", lin.q[members, :, r], lin.probs[members] - onehot)
        c_i = c_i.abs() + dev_c[members, r]
        first = first + along @ dev_c[members, r] + g * float((c_i * err[members]).sum())
    ek = float(err[k])
    qn_k = lin.q_norm[k]
    return first / den + 0.75 * qn_k * float(lin.m_norm[k]) ** 2 * ek**2


def _labels(lin: Linearisation, k: int, move: torch.Tensor, e_b: torch.Tensor) -> bool:
    """Whether every other label of sample ``k`` is excluded by some row.

    A label ``y'`` shifts ``c_k`` by the constant ``q_y - q_y'``; the true coefficient lies
    within ``e_b`` of the decoded one and moves by at most ``move`` inside the error ball.
    """
    q = lin.q[k]  # (C, m')
    gap = (q[lin.labels[k]].unsqueeze(0) - q).abs()  # (C, m')
    excluded = (gap - move > e_b).any(1)
    excluded[lin.labels[k]] = True
    return bool(excluded.all())


def refine_chain_dense(
    lin: Linearisation, resid: torch.Tensor, slack: torch.Tensor, chain: Chain, passes: int = 3
) -> Chain:
    """Up to ``passes`` rounds of ``e <- min(e, F(e))`` over the chain's samples."""
    on = torch.zeros(lin.n, dtype=torch.bool)
    on[chain.order] = True
    if not bool(on.all()):
        return chain  # samples off the chain reach rows without a bound
    err, dev_c, dev_v = chain.error.clone(), chain.dev_c.clone(), chain.dev_v.clone()
    xn = lin.x.norm(dim=1)
    chat = lin.coefficients().abs()
    res_w, res_b = resid[:, :-1].norm(dim=1), resid[:, -1].abs()
    dist = torch.cdist(lin.x, lin.x)
    own = res_w + slack[:, 0] + xn.unsqueeze(1) * (res_b + slack[:, 1])  # (n, m')
    for _ in range(passes):
        e_b = res_b + slack[:, 1] + dev_c.sum(0) - dev_c  # every member but k
        num = own + dist @ dev_c + dev_v.sum(0) - dev_v
        den = chat - e_b
        bound = torch.where(den > 0, num / den, math.inf)
        best, rows = bound.min(1)
        better = torch.nonzero(best < err * (1 - 1e-6)).squeeze(1)
        if better.numel() == 0:
            break
        for k in better.tolist():
            r = int(rows[k])
            err[k] = best[k]
            parts = (float(own[k, r]), float(den[k, r]))
            dev_c[k] = _coefficient_moves(lin, (k, r), parts, err, _without(dev_c, k))
            dev_v[k] = (chat[k] + dev_c[k]) * err[k]
    return Chain(chain.order, err, chain.label_ok, dev_c, dev_v)


def _without(dev_c: torch.Tensor, k: int) -> torch.Tensor:
    out = dev_c.clone()
    out[k] = 0.0
    return out
