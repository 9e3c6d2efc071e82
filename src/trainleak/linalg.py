"""Orthogonal-group helpers: Haar-random rotations and the polar factor (Procrustes)."""

from __future__ import annotations

import numpy as np


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
