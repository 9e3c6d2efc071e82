"""Frozen, public feature maps for the ridge-head unlearning server."""

from __future__ import annotations

from typing import Literal

import numpy as np

from trainleak.validation import check_choice

FeatureKind = Literal["raw", "relu"]


def frozen_features(x: np.ndarray, kind: FeatureKind, dim: int = 64, seed: int = 0) -> np.ndarray:
    """Map inputs (n, ...) to frozen features (n, d): raw pixels or random ReLU features.

    Random ReLU features are ``relu(G x + b) / sqrt(d)`` with Gaussian ``G`` (scaled by
    ``1/sqrt(input dim)``) and ``b``, drawn from ``seed``: a public, frozen stand-in for a
    foundation-model backbone [inferred] (Rahimi & Recht, NeurIPS 2007, random features).

    Args:
        x: inputs, any trailing shape.
        kind: ``"raw"`` (flattened inputs) or ``"relu"``.
        dim: output dimension for ``"relu"``.
        seed: seed of the random projection.

    Returns:
        Float64 features.
    """
    check_choice("kind", kind, ("raw", "relu"))
    flat = np.asarray(x, dtype=np.float64).reshape(x.shape[0], -1)
    if kind == "raw":
        return flat
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((flat.shape[1], dim)) / np.sqrt(flat.shape[1])
    b = rng.standard_normal(dim) * 0.5
    return np.asarray(np.maximum(flat @ G + b, 0.0) / np.sqrt(dim) * 4.0)
