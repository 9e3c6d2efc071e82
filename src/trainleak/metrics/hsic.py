"""The Hilbert-Schmidt independence criterion (HSIC) with Gaussian kernels.

The biased estimator ``HSIC(X, Z) = tr(K H L H) / (n - 1)^2`` with ``K``, ``L`` Gaussian Gram
matrices and ``H = I - 11^T / n`` (Gretton et al. 2005). BiDO penalises HSIC(X, Z) and rewards
HSIC(Y, Z) on a classifier's features; AT-AT's first finding is that effective inversion
defenses do not lower either. The default bandwidth is the median heuristic (the median of the
pairwise distances), documented per call in ``sigma``.

References:
    Gretton, Bousquet, Smola and Schoelkopf, "Measuring Statistical Dependence with
    Hilbert-Schmidt Norms", ALT 2005.
    Peng, Liu, Zhou, Liu, Zhou and Han, "Bilateral Dependency Optimization: Defending Against
    Model-inversion Attacks", KDD 2022 (BiDO).
"""

from __future__ import annotations

import torch

from trainleak.errors import ShapeError
from trainleak.validation import check_positive


def median_bandwidth(x: torch.Tensor) -> torch.Tensor:
    """The median pairwise Euclidean distance of the rows of ``x`` (at least 1e-6)."""
    d = torch.cdist(x.flatten(1), x.flatten(1))
    n = int(x.shape[0])
    off = d[~torch.eye(n, dtype=torch.bool, device=x.device)]
    return off.median().clamp_min(1e-6) if off.numel() else torch.ones((), dtype=x.dtype)


def gaussian_gram(x: torch.Tensor, sigma: float | torch.Tensor | None = None) -> torch.Tensor:
    """``K_ij = exp(-|x_i - x_j|^2 / (2 sigma^2))`` of the flattened rows of ``x``.

    Args:
        x: ``(n, ...)``.
        sigma: the bandwidth; ``None`` uses :func:`median_bandwidth` (detached).
    """
    flat = x.flatten(1)
    s = median_bandwidth(flat.detach()) if sigma is None else torch.as_tensor(sigma).to(flat)
    if sigma is not None:
        check_positive("sigma", float(s))
    d2 = torch.cdist(flat, flat).pow(2)
    return torch.exp(-d2 / (2 * s**2))


def hsic_from_grams(k: torch.Tensor, l: torch.Tensor) -> torch.Tensor:  # noqa: E741
    """Biased HSIC ``tr(K H L H) / (n - 1)^2`` from two ``(n, n)`` Gram matrices."""
    n = int(k.shape[0])
    if k.shape != l.shape or k.ndim != 2 or k.shape[1] != n or n < 2:
        raise ShapeError(f"HSIC needs two (n, n) Gram matrices, n >= 2, got {k.shape}, {l.shape}")
    h = torch.eye(n, dtype=k.dtype, device=k.device) - 1.0 / n
    return torch.trace(k @ h @ l @ h) / (n - 1) ** 2


def hsic(
    x: torch.Tensor,
    z: torch.Tensor,
    sigma_x: float | None = None,
    sigma_z: float | None = None,
) -> torch.Tensor:
    """Gaussian-kernel biased HSIC between the rows of ``x`` and ``z`` (differentiable).

    Args:
        x, z: ``(n, ...)`` with the same ``n``.
        sigma_x, sigma_z: bandwidths; ``None`` is the median heuristic.
    """
    if x.shape[0] != z.shape[0]:
        raise ShapeError(f"HSIC pairs rows: {x.shape[0]} and {z.shape[0]} rows")
    return hsic_from_grams(gaussian_gram(x, sigma_x), gaussian_gram(z, sigma_z))


def hsic_labels(
    y: torch.Tensor, z: torch.Tensor, num_classes: int, sigma_z: float | None = None
) -> torch.Tensor:
    """HSIC between one-hot labels (Gaussian kernel, bandwidth 1) and features ``z``."""
    onehot = torch.nn.functional.one_hot(y, num_classes).to(z.dtype)
    return hsic(onehot, z, 1.0, sigma_z)
