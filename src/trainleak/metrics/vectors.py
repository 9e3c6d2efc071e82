"""Scoring recovered feature vectors against the true ones (unlearning broadcasts, seed 6)."""

from __future__ import annotations

import numpy as np


def abs_cosine(recovered: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Row-wise ``|cos|`` between recovered and true vectors (sign-free: scale is unknown)."""
    num = np.abs((recovered * true).sum(1))
    den = np.linalg.norm(recovered, axis=1) * np.linalg.norm(true, axis=1)
    return np.asarray(num / np.maximum(den, 1e-300))


def exact_rows(
    recovered: np.ndarray,
    labels: np.ndarray,
    true: np.ndarray,
    true_labels: np.ndarray,
    *,
    min_cosine: float = 0.999,
) -> np.ndarray:
    """Rows recovered exactly: the right label and ``|cos| > min_cosine`` to the true vector."""
    return np.asarray((labels == true_labels) & (abs_cosine(recovered, true) > min_cosine))


def relative_error(estimate: np.ndarray, true: np.ndarray) -> float:
    """``||estimate - true||_F / ||true||_F`` (the denominator floored at 1e-300).

    The one implementation: Data Collaboration's scores (:mod:`trainleak.metrics.collaboration`)
    use it too.
    """
    return float(np.linalg.norm(estimate - true) / max(float(np.linalg.norm(true)), 1e-300))
