"""Linear-algebra helpers: Haar-random rotations, the polar factor (Procrustes), and the
row space of a layer gradient with the distance of a vector to it (span tests), products
with a weight whose rows repeat (:class:`RowGroups`), and the projection onto an l1 ball."""

from __future__ import annotations

import math

import numpy as np
import torch


def haar_orthogonal(m: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-distributed orthogonal ``m x m`` matrix (QR of a Gaussian, signs fixed).

    References:
        Mezzadri, *How to generate random matrices from the classical compact groups*,
        Notices AMS 2007.
    """
    q, r = np.linalg.qr(rng.standard_normal((m, m)))
    return np.asarray(q * np.sign(np.diag(r)))


def polar(M: np.ndarray) -> np.ndarray:
    """The orthogonal polar factor ``U V^T`` of ``M = U S V^T``: the Procrustes solution.

    ``polar(X^T Y)`` is the orthogonal ``R`` minimising ``||X R - Y||_F`` (Schoenemann 1966).
    """
    u, _, vt = np.linalg.svd(M, full_matrices=False)
    return np.asarray(u @ vt)


def procrustes_affine(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthogonal ``R`` and shift ``s`` minimising ``||X R + 1 s^T - Y||_F``."""
    mx, my = X.mean(0), Y.mean(0)
    R = polar((X - mx).T @ (Y - my))
    return R, my - mx @ R


def row_space(
    grad: torch.Tensor, rank: int | None = None, tol: float | None = None
) -> torch.Tensor:
    """Orthonormal basis ``(d, r)`` of the row space of a token-wise layer's gradient.

    A token-wise linear layer ``y = W z`` fed ``z_1, ..., z_m`` has gradient
    ``sum_i g_i z_i^T``, whose row space is ``span{z_i}`` when ``m < d`` (Petrov et al.,
    *DAGER*, NeurIPS 2024, Sec. 3). The basis is the top ``r`` right singular vectors of
    ``grad`` ``(rows, d)``: ``r = rank`` when given (under noise, the top ``B * n``), else the
    number of singular values above ``tol`` times the largest (default: ``max(rows, d)`` times
    the dtype's machine epsilon).

    Raises:
        ValueError: ``grad`` is not a finite matrix, or ``rank`` is outside ``[1, d]``.
    """
    if grad.ndim != 2 or not bool(torch.isfinite(grad).all()):
        raise ValueError("the gradient must be a finite matrix (rows, d)")
    _, s, vh = torch.linalg.svd(grad, full_matrices=False)
    if rank is None:
        eps = torch.finfo(grad.dtype).eps * max(grad.shape) if tol is None else tol
        rank = max(int((s > eps * s[0]).sum()), 1) if float(s[0]) > 0 else 1
    if not 1 <= rank <= vh.shape[0]:
        raise ValueError(f"rank must lie in [1, {vh.shape[0]}], got {rank}")
    return vh[:rank].T.contiguous()


def cosine_gap(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``1 - cos`` between ``a`` and ``b`` along the last dimension (``eps`` added to the
    product of norms): the per-row term of dataset condensation's gradient-matching distance
    (Zhao, Mopuri and Bilen, ICLR 2021)."""
    return 1 - (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1) + eps)


def span_distance(v: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """Distance of the unit-normalised rows of ``v`` ``(..., d)`` to ``span(basis)``.

    ``|| v_hat - R R^T v_hat ||`` with ``v_hat = v / ||v||`` and ``R`` orthonormal ``(d, r)``,
    so 0 for a vector in the span and 1 for one orthogonal to it (DAGER's span check).
    """
    unit = v / v.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(v.dtype).tiny)
    return (unit - (unit @ basis) @ basis.T).norm(dim=-1)


class RowGroups:
    """Rows of a first-layer weight that are exact copies of each other (a malicious imprint
    layer repeats one direction per group): ``weight == unique[inverse]`` bit for bit.

    Products with the weight then run over the distinct rows only; on an honest layer (no
    repeated rows) they fall back to the plain product.
    """

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight
        probe = torch.linspace(1.0, 2.0, int(weight.shape[1]), dtype=weight.dtype)
        _, inverse = torch.unique(weight @ probe, return_inverse=True)
        first = torch.full((int(inverse.max()) + 1,), weight.shape[0], dtype=torch.long)
        first.scatter_reduce_(0, inverse, torch.arange(weight.shape[0]), reduce="amin")
        exact = 2 * first.numel() <= weight.shape[0] and torch.equal(weight[first][inverse], weight)
        self.unique = weight[first] if exact else None
        self.inverse = inverse

    def left(self, q: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``q @ weight[rows]`` for ``q`` of shape ``(..., len(rows))`` (all rows by default)."""
        if self.unique is None:
            return q @ (self.weight if rows is None else self.weight[rows])
        merged = torch.zeros(*q.shape[:-1], self.unique.shape[0], dtype=q.dtype)
        inverse = self.inverse if rows is None else self.inverse[rows]
        return merged.index_add_(-1, inverse, q) @ self.unique

    def factor(
        self, q: torch.Tensor, rows: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(coef, basis)`` with ``coef @ basis == q @ weight[rows]``: ``basis`` the distinct
        rows (the rows themselves when none repeat)."""
        if self.unique is None:
            return q, (self.weight if rows is None else self.weight[rows])
        merged = torch.zeros(*q.shape[:-1], self.unique.shape[0], dtype=q.dtype)
        inverse = self.inverse if rows is None else self.inverse[rows]
        return merged.index_add_(-1, inverse, q), self.unique

    def unique_rows(self) -> torch.Tensor:
        """The distinct rows (all rows when none repeat)."""
        return self.weight if self.unique is None else self.unique

    def right(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ weight^T`` for ``x`` of shape ``(n, d)``."""
        if self.unique is None:
            return x @ self.weight.T
        return (x @ self.unique.T)[:, self.inverse]

    def spectral_norm(self) -> float:
        """``||weight||_2``, from the Gram matrix of the distinct rows weighted by their counts."""
        if self.unique is None:
            return float(torch.linalg.matrix_norm(self.weight, ord=2))
        counts = torch.bincount(self.inverse).to(self.weight.dtype).sqrt()
        scaled = self.unique * counts.unsqueeze(1)
        return math.sqrt(max(float(torch.linalg.eigvalsh(scaled @ scaled.T)[-1]), 0.0))


def later_duplicates(x: torch.Tensor, tol: float) -> torch.Tensor:
    """Which rows of ``x`` (``(n, d)``) lie within ``tol`` in max-abs distance of an earlier row.

    Equal to ``torch.triu(torch.cdist(x, x, p=inf) <= tol, 1).any(0)``, without the ``n x n x
    d`` work: two rows within ``tol`` have means within ``tol`` (plus the means' rounding, at
    most ``d eps max|x|``), so only pairs whose means are that close are compared exactly.
    """
    n, d = int(x.shape[0]), int(x.shape[1])
    dup = torch.zeros(n, dtype=torch.bool)
    if n < 2:
        return dup
    mean = x.mean(1)
    width = tol + d * float(torch.finfo(x.dtype).eps) * float(x.abs().max())
    order = torch.argsort(mean)
    s = mean[order]
    hi = torch.searchsorted(s, s + width, right=True)
    start = torch.arange(n) + 1
    count = (hi - start).clamp_min(0)
    if int(count.sum()) > n * n // 4:  # no pruning to speak of: compare every pair
        return torch.triu(torch.cdist(x, x, p=float("inf")) <= tol, diagonal=1).any(0)
    a = torch.repeat_interleave(torch.arange(n), count)
    b = torch.arange(int(count.sum())) - torch.repeat_interleave(count.cumsum(0) - count, count)
    i, j = order[a], order[start[a] + b]
    close = (x[i] - x[j]).abs().amax(1) <= tol
    later = torch.maximum(i, j)[close]
    dup[later] = True
    return dup


def project_l1_ball(v: torch.Tensor, radius: torch.Tensor) -> torch.Tensor:
    """Euclidean projection of every row of ``v`` onto the l1 ball of its row's ``radius``
    (Duchi, Shalev-Shwartz, Singer and Chandra, "Efficient Projections onto the l1-Ball for
    Learning in High Dimensions", ICML 2008: soft thresholding at the level that puts the
    row's l1 norm on the radius; rows inside the ball are returned unchanged)."""
    flat = v.flatten(1)
    r = radius.to(flat).reshape(-1).expand(flat.shape[0])
    a = flat.abs()
    u = a.sort(1, descending=True).values
    css = u.cumsum(1)
    j = torch.arange(1, u.shape[1] + 1, device=flat.device, dtype=flat.dtype)
    rho = (u - (css - r[:, None]) / j > 0).sum(1).clamp_min(1)
    theta = (css.gather(1, (rho - 1)[:, None]).squeeze(1) - r) / rho.to(flat)
    out = flat.sign() * (a - theta[:, None]).clamp_min(0)
    out = torch.where((a.sum(1) <= r)[:, None], flat, out)
    return out.view_as(v)
