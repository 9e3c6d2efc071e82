"""Metrics for Data Collaboration: identity linkage, reconstruction error, downstream accuracy."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression

from trainleak.errors import ShapeError
from trainleak.metrics.vectors import relative_error

__all__ = ["downstream_accuracy", "linkage_rate", "relative_error"]


def linkage_rate(
    X_hat: np.ndarray, ids: np.ndarray, gallery: np.ndarray, gallery_ids: np.ndarray
) -> float:
    """Fraction of reconstructed rows whose cosine top-1 gallery neighbour has their identity.

    Args:
        X_hat: reconstructed rows (n x m).
        ids: their true identities (n,).
        gallery: true embeddings (N x m).
        gallery_ids: identities of the gallery rows (N,).

    Returns:
        The identity-linkage rate in [0, 1].
    """
    if X_hat.shape[1] != gallery.shape[1] or len(ids) != len(X_hat):
        raise ShapeError(
            f"linkage_rate: X_hat {X_hat.shape}, ids {ids.shape}, gallery {gallery.shape}"
        )
    a = X_hat / np.maximum(np.linalg.norm(X_hat, axis=1, keepdims=True), 1e-300)
    b = gallery / np.maximum(np.linalg.norm(gallery, axis=1, keepdims=True), 1e-300)
    nearest = np.argmax(a @ b.T, axis=1)
    return float((gallery_ids[nearest] == ids).mean())


def downstream_accuracy(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    *,
    C: float = 1.0,
) -> float:
    """Accuracy of a logistic-regression classifier trained on the collaborative representation."""
    mu, sd = train_x.mean(0), train_x.std(0) + 1e-12
    clf = LogisticRegression(C=C, max_iter=2000)
    clf.fit((train_x - mu) / sd, train_y)
    return float((clf.predict((test_x - mu) / sd) == test_y).mean())
