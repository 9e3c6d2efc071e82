"""Tightening the pivot chain's bounds with every row, once every sample has a bound.

The chain bounds sample ``k`` from one row in which the other members were ordered before it.
Once all samples carry valid bounds ``e``, *any* row holding ``k`` bounds it again in terms of
the other members' bounds: the map ``F`` from bounds to row-wise bounds is monotone and the true
errors satisfy ``e* <= F(e*)``, so ``e* <= e`` implies ``e* <= F(e)`` and ``min(e, F(e))`` is
again a valid bound (a Gauss-Seidel pass on the bounds). Deep chains, whose worst-case bounds
grow with every level, shrink when a sample has a second row with better-known neighbours.

Like the pivot chain (:mod:`._certificate_pivot`) it evaluates the bounds only on the pairs
``(k, r)`` where sample ``k`` has a non-zero coefficient (elsewhere the denominator is not
positive), on NumPy views of the tensors.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from trainleak.attacks.gradient._certificate import Chain
from trainleak.attacks.gradient._certificate_pivot import _Arrays, _moves
from trainleak.attacks.gradient._linearisation import Linearisation


def _pair_products(
    dist: np.ndarray, dev_c: np.ndarray, pk: np.ndarray, pr: np.ndarray
) -> np.ndarray:
    """``(dist @ dev_c)[pk, pr]``, without the whole product when the pairs are few."""
    n, m = dev_c.shape
    if pk.size * n > n * m * 4:
        return (dist @ dev_c)[pk, pr]
    return np.einsum("pi,ip->p", dist[pk], dev_c[:, pr])


def refine_chain(
    lin: Linearisation, resid: torch.Tensor, slack: torch.Tensor, chain: Chain, passes: int = 3
) -> Chain:
    """Up to ``passes`` rounds of ``e <- min(e, F(e))`` over the chain's samples."""
    on = torch.zeros(lin.n, dtype=torch.bool)
    on[chain.order] = True
    if not bool(on.all()):
        return chain  # samples off the chain reach rows without a bound
    a = _Arrays.of(lin)
    err, dev_c, dev_v = (t.numpy().copy() for t in (chain.error, chain.dev_c, chain.dev_v))
    xn = lin.x.norm(dim=1).numpy()
    chat = lin.coefficients().abs().numpy()
    res_w, res_b = resid[:, :-1].norm(dim=1).numpy(), resid[:, -1].abs().numpy()
    slack_w, slack_b = slack[:, 0].contiguous().numpy(), slack[:, 1].contiguous().numpy()
    dist = torch.cdist(lin.x, lin.x).numpy()
    pk, pr = np.nonzero(chat > 0)  # by sample, then row
    starts = np.flatnonzero(np.r_[True, pk[1:] != pk[:-1]]) if pk.size else pk
    owners = pk[starts]
    own = res_w[pr] + slack_w[pr] + xn[pk] * (res_b[pr] + slack_b[pr])
    for _ in range(passes):
        e_b = res_b[pr] + slack_b[pr] + dev_c.sum(0)[pr] - dev_c[pk, pr]  # every member but k
        num = own + _pair_products(dist, dev_c, pk, pr) + dev_v.sum(0)[pr] - dev_v[pk, pr]
        den = chat[pk, pr] - e_b
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(den > 0, num / den, math.inf)
        best = np.full(lin.n, math.inf)
        at = np.zeros(lin.n, dtype=np.int64)
        if pk.size:
            best[owners] = np.minimum.reduceat(bound, starts)
            hit = np.flatnonzero(bound == best[pk])  # first pair at each sample's minimum
            first = np.r_[True, pk[hit[1:]] != pk[hit[:-1]]]
            at[pk[hit[first]]] = hit[first]
        better = np.flatnonzero(best < err * (1 - 1e-6))
        if better.size == 0:
            break
        for k in better.tolist():
            j = int(at[k])
            r = int(pr[j])
            err[k] = best[k]
            col = dev_c[:, r].copy()
            col[k] = 0.0
            dev_c[k] = _moves(a, (k, r), (float(own[j]), float(den[j])), err, col)
            dev_v[k] = (chat[k] + dev_c[k]) * err[k]
    t = torch.from_numpy
    return Chain(chain.order, t(err), chain.label_ok, t(dev_c), t(dev_v))
