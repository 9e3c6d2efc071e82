"""Random-feature reconstruction theory: the projection loss and the width threshold.

For a random-feature model f(x) = a^T sigma(W x) whose last layer is trained by gradient descent
from a_0, the change a_T - a_0 lies in span{sigma(W x_i)}. Reconstruction searches n inputs
whose feature vectors span it: the *projection loss* below is zero at the training set. Whether
the training set is its only global minimiser (up to permutation, and sign for symmetric
activations) is a matter of counting: the change gives p - n independent equations for n d
unknowns, and recovery is provable once the width p exceeds about d n (times logarithmic
factors) under the assumptions of the theorem: continuous non-polynomial activations with
bounded derivatives, data on the sphere of radius sqrt(d) with a separation margin, interpolation
coefficients bounded away from zero, exact optimisation. When the data lie in a known
s-dimensional subspace and the search is restricted to it, d is replaced by s.

The constants of the theorem are not public; :func:`width_threshold` returns the counting
guide ``factor * dim * n`` and :func:`empirical_transition` reads the threshold off a sweep, so
the two can be compared.

References:
    Tansley, Makhlouf, Massart et al., "Efficient Techniques for Data Reconstruction, with
    Finite-Width Recovery Guarantees", arXiv 2605.06519, 2026 (width threshold and its
    subspace relaxation).
    Iurada, Bombari, Tommasi and Mondelli, "A Law of Data Reconstruction for Random Features
    (and Beyond)", ICLR 2026, arXiv 2509.22214 (the projection loss; p >> d n).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trainleak.errors import ConfigError, ShapeError
from trainleak.validation import check_positive


def width_threshold(d: int, n: int, s: int | None = None, *, factor: float = 1.0) -> float:
    """The width above which recovery is expected: ``factor * d * n``, or ``factor * s * n``.

    Args:
        d: input dimension.
        n: number of training points.
        s: dimension of the data subspace the search is restricted to (``None``: full space).
        factor: the constant in front (the theorem's constant and log factors are unknown;
            1 is the parameter-counting value).

    Returns:
        The threshold width.

    Raises:
        ConfigError: for non-positive sizes or ``s > d``.

    Example:
        >>> width_threshold(20, 10), width_threshold(20, 10, s=3)
        (200.0, 30.0)
    """
    for name, value in (("d", d), ("n", n), ("factor", factor)):
        check_positive(name, value)
    if s is not None and not 0 < s <= d:
        raise ConfigError.invalid("s", f"None or an integer in [1, d={d}]", s)
    return float(factor * (d if s is None else s) * n)


def projection_loss(
    gram: torch.Tensor, inner: torch.Tensor, delta_sq: torch.Tensor | float, *, ridge: float = 0.0
) -> torch.Tensor:
    """(||delta||^2 - tr(V^T K^{-1} V)) / ||delta||^2: the unexplained share of a parameter change.

    With Phi the k candidate gradients (rows) and delta the change (one row per output when the
    features are shared across outputs), K = Phi Phi^T and V = Phi delta^T; the value is the
    squared norm of delta's component orthogonal to the rows of Phi, relative to ||delta||^2.

    Args:
        gram: ``(k, k)`` Gram matrix K.
        inner: ``(k, C)`` inner products V.
        delta_sq: ||delta||^2 (summed over the C rows).
        ridge: added to K's diagonal as ``ridge * trace(K) / k`` before solving.

    Returns:
        A scalar tensor in [0, 1] up to rounding, differentiable in ``gram`` and ``inner``.

    Raises:
        ShapeError: when the shapes do not agree.

    Example:
        >>> phi = torch.eye(2, 3, dtype=torch.float64)
        >>> delta = torch.tensor([[1.0, 2.0, 2.0]], dtype=torch.float64)
        >>> float(projection_loss(phi @ phi.T, phi @ delta.T, 9.0))  # the 3rd coordinate is left
        0.4444444444444444
    """
    k = gram.shape[0]
    if gram.shape != (k, k) or inner.ndim != 2 or inner.shape[0] != k:
        raise ShapeError(f"gram {tuple(gram.shape)} and inner {tuple(inner.shape)} do not agree")
    if ridge > 0:
        gram = gram + ridge * gram.diagonal().sum() / k * torch.eye(k, dtype=gram.dtype)
    explained = (inner * torch.linalg.solve(gram, inner)).sum()
    return (delta_sq - explained) / delta_sq


def empirical_transition(
    widths: Sequence[float], errors: Sequence[float], *, tol: float
) -> float | None:
    """The smallest width from which on every error is below ``tol`` (``None`` if never).

    Args:
        widths: increasing widths of a sweep.
        errors: the reconstruction error at each width.
        tol: the error counted as recovery.

    Example:
        >>> empirical_transition([50, 100, 200, 400], [0.9, 0.5, 0.01, 0.02], tol=0.05)
        200
    """
    if len(widths) != len(errors):
        raise ShapeError(f"{len(widths)} widths but {len(errors)} errors")
    found: float | None = None
    for w, e in zip(widths, errors):
        found = (w if found is None else found) if e < tol else None
    return found
