"""Embeddings for the collusion experiment: synthetic faces and the ORL faces through PCA."""

from __future__ import annotations

import numpy as np


def synthetic_faces(
    identities: int, per_identity: int, dim: int, *, noise: float = 0.5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Identity centres plus within-identity noise, and a binary attribute of the centre.

    Returns:
        ``(X, identity, attribute)``: embeddings ``(n, dim)``, identities and a binary label
        (the sign of a fixed linear function of the centre) [inferred stand-in for faces].
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((identities, dim))
    direction = rng.standard_normal(dim)
    ids = np.repeat(np.arange(identities), per_identity)
    X = centres[ids] + noise * rng.standard_normal((len(ids), dim))
    attr = (centres[ids] @ direction > 0).astype(np.int64)
    return X, ids, attr


def pca_embed(images: np.ndarray, dim: int) -> np.ndarray:
    """Standardised principal-component scores (a public, frozen embedding) [inferred]."""
    flat = images.reshape(images.shape[0], -1).astype(np.float64)
    centred = flat - flat.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    z = centred @ vt[:dim].T
    return np.asarray(z / z.std(0))


def random_anchor(X: np.ndarray, rows: int, seed: int) -> np.ndarray:
    """Anchor rows drawn from a Gaussian with the data's public mean and per-dimension scale."""
    rng = np.random.default_rng(seed)
    return np.asarray(X.mean(0) + X.std(0) * rng.standard_normal((rows, X.shape[1])))
