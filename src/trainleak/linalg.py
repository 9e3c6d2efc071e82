"""Linear-algebra helpers: Haar-random rotations, the polar factor (Procrustes), and the
row space of a layer gradient with the distance of a vector to it (span tests)."""

from __future__ import annotations

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


def span_distance(v: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """Distance of the unit-normalised rows of ``v`` ``(..., d)`` to ``span(basis)``.

    ``|| v_hat - R R^T v_hat ||`` with ``v_hat = v / ||v||`` and ``R`` orthonormal ``(d, r)``,
    so 0 for a vector in the span and 1 for one orthogonal to it (DAGER's span check).
    """
    unit = v / v.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(v.dtype).tiny)
    return (unit - (unit @ basis) @ basis.T).norm(dim=-1)
