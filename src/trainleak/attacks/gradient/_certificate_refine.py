"""Tightening the pivot chain's bounds with every row, once every sample has a bound.

The chain bounds sample ``k`` from one row in which the other members were ordered before it.
Once all samples carry valid bounds ``e``, *any* row holding ``k`` bounds it again in terms of
the other members' bounds: the map ``F`` from bounds to row-wise bounds is monotone and the true
errors satisfy ``e* <= F(e*)``, so ``e* <= e`` implies ``e* <= F(e)`` and ``min(e, F(e))`` is
again a valid bound (a Gauss-Seidel pass on the bounds). Deep chains, whose worst-case bounds
grow with every level, shrink when a sample has a second row with better-known neighbours.
"""

from __future__ import annotations

import math

import torch

from trainleak.attacks.gradient._certificate import Chain, _coefficient_moves
from trainleak.attacks.gradient._linearisation import Linearisation


def refine_chain(
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
