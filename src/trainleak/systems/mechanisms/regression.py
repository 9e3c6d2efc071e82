"""Ridge regression with Gaussian output perturbation, a rho-zCDP mechanism.

theta_hat = argmin 1/2 sum_i (y_i - x_i^T theta)^2 + lam/2 ||theta||^2 = (X^T X + lam I)^{-1} X^T y
is released as theta_hat + N(0, sigma^2 I) with sigma = Delta / sqrt(2 rho), which is rho-zCDP
(Bun & Steinke 2016, Prop. 1.6) for the replace-one l2 sensitivity Delta.

Sensitivity [inferred, standard argument]: with ||x|| <= 1 and |y| <= 1, the objective without
the replaced record is lam-strongly convex, and monotonicity of the loss gradients gives
||theta_hat - theta_hat'|| <= ||grad l_z'(theta_hat') - grad l_z(theta_hat')|| / lam
<= 2 (1 + ||theta_hat'||) / lam, while ||theta_hat'||^2 <= sum y_i^2 / lam <= n / lam (compare
the objective at theta_hat' and at 0). Hence Delta = 2 (1 + sqrt(n / lam)) / lam.

References:
    Chaudhuri, Monteleoni & Sarwate, *Differentially Private Empirical Risk Minimization*,
    JMLR 12, 2011 (output perturbation).
    Bun & Steinke, *Concentrated Differential Privacy*, TCC 2016, arXiv 1605.02065.
"""

from __future__ import annotations

import math

import torch

from trainleak.errors import ConfigError, ShapeError
from trainleak.releases.dp import PrivateRegression
from trainleak.validation import check_positive


def ridge_sensitivity(n: int, lam: float) -> float:
    """Replace-one l2 sensitivity of ridge regression for ||x|| <= 1, |y| <= 1.

    Example:
        >>> ridge_sensitivity(100, 100.0)
        0.04
    """
    check_positive("lam", lam)
    return 2.0 * (1.0 + math.sqrt(n / lam)) / lam


def ridge_output_perturbation(
    x: torch.Tensor, y: torch.Tensor, *, lam: float, rho: float, generator: torch.Generator
) -> PrivateRegression:
    """Release ridge coefficients under rho-zCDP by adding Gaussian noise.

    Args:
        x: ``(n, d)`` records with ||x_i|| <= 1.
        y: ``(n,)`` responses with |y_i| <= 1.
        lam: ridge parameter (> 0).
        rho: zCDP parameter (> 0).
        generator: source of the noise.

    Returns:
        The :class:`PrivateRegression` release (float64).

    Raises:
        ConfigError: non-positive lam or rho, or records outside the unit ball / labels
            outside [-1, 1] (the sensitivity would not hold).
        ShapeError: mismatched shapes.
    """
    check_positive("lam", lam)
    check_positive("rho", rho)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ShapeError(f"need x (n, d) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    x64, y64 = x.double(), y.double()
    if float(x64.norm(dim=1).max()) > 1 + 1e-9:
        raise ConfigError.invalid("x", "rows of l2 norm <= 1", float(x64.norm(dim=1).max()))
    if float(y64.abs().max()) > 1 + 1e-9:
        raise ConfigError.invalid("y", "responses in [-1, 1]", float(y64.abs().max()))
    n, d = x64.shape
    theta = torch.linalg.solve(x64.T @ x64 + lam * torch.eye(d, dtype=torch.float64), x64.T @ y64)
    delta = ridge_sensitivity(n, lam)
    sigma = delta / math.sqrt(2.0 * rho)
    noise = torch.randn(d, generator=generator, dtype=torch.float64) * sigma
    return PrivateRegression(theta + noise, lam, rho, delta, sigma, n)


def sphere_records(n: int, d: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n records uniform on the unit sphere in R^d with labels uniform in {-1, +1}."""
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    y = torch.randint(0, 2, (n,), generator=generator).double() * 2 - 1
    return x, y


def subspace_records(
    n: int, d: int, s: int, generator: torch.Generator, basis: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n records x = U z with z uniform on the unit sphere of R^s and U (d, s) orthonormal.

    Returns:
        ``(x, y, U)``.
    """
    if not 1 <= s <= d:
        raise ConfigError.invalid("s", f"an integer in [1, {d}]", s)
    if basis is None:
        q, _ = torch.linalg.qr(torch.randn(d, s, generator=generator, dtype=torch.float64))
        basis = q
    z, y = sphere_records(n, s, generator)
    return z @ basis.T, y, basis
