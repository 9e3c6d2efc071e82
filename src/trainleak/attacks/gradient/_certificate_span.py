"""Certifying a large core through the span of its first-layer gradient (SPEAR's reduction).

The core's block ``G = C^T X~`` (``C``: the ``n`` core samples' coefficient rows, ``X~``: their
inputs with a trailing 1) has rank ``n``. Any true core ``(C', X~')`` whose block ``G'`` is
within ``a`` of ``G`` has rank ``n`` too when ``sigma_n(G) > a``, so the rows of ``X~'`` span
``G'``'s row space, which Wedin's theorem puts within ``sin theta <= a / sigma_n(G)`` of the
span of ``X~``. Hence, *globally*, ``X~' = M X~ + R`` with ``||R_k|| <= sin theta ||x~'_k||``
and ``R`` orthogonal to the rows of ``X~``, so that ``C'^T M = C^T + Delta`` with ``Delta = (G'
- G) X~^+``, ``||Delta|| <= a / sigma_n(X~)``. Only the ``n x n`` mixing matrix ``M = I + N`` is
left, tied to the network by ``C'_k = c(x'_k)`` with ``x'_k - x_k = sum_j N_kj (x_j - x_k) +
s_k`` (``s_k`` from ``R``, ``||s_k|| <= ||R_k|| ||x~_k||``):

    ``Dc_k (sum_j N_kj (x_j - x_k)) + sum_j N_jk c_j = (terms in s, Delta, N^2)``.

The left side is a linear map ``K`` of ``N`` (``n^2`` unknowns, its Gram matrix assembled
here). In ``tau = ||K N||`` the right side is at most ``b0 + beta tau^2`` (``||N|| <= tau /
sigma_min(K)`` and ``||T N|| <= gamma tau``, ``T N`` being the inputs' move ``sum_j N_kj (x_j -
x_k)``), so every solution with ``tau <= tau_local`` has ``tau <= tau_1 = (1 - sqrt(1 - 4 b0
beta)) / (2 beta)`` and the core's inputs move by at most ``gamma tau_1 + ||s||``. Other labels
add a constant of norm at least ``d_min`` and are excluded while ``d_min > tau + b0 + beta
tau^2``. Since ``N = (X~' - X~) X~^+``, an x-space ball of Frobenius radius ``rho`` maps into
``tau <= ||K|| rho / sigma_n(X~)``.

References:
    Dimitrov, Baader, Mueller, Vechev, *SPEAR: Exact Gradient Inversion of Batches in Federated
    Learning*, NeurIPS 2024 (the row space of the first-layer gradient). Wedin, *Perturbation
    bounds in connection with singular value decomposition*, BIT 12, 1972.
"""

from __future__ import annotations

import math

import torch

from trainleak.attacks.gradient._certificate_core import CoreBound
from trainleak.attacks.gradient._linearisation import Linearisation


def mixing_gram(lin: Linearisation) -> torch.Tensor:
    """Gram matrix ``K^T K`` of the mixing map, ``(n^2, n^2)``, index ``(k, j) -> k n + j``."""
    n, x = lin.n, lin.x
    c = lin.coefficients()  # (n, m')
    w = torch.einsum("kcd,kjd->kjc", lin.jpm, x.unsqueeze(0) - x.unsqueeze(1))
    g = torch.einsum("kcr,kjc->kjr", lin.q, w)  # g_kj = Dc_k (x_j - x_k), (n, n, m')
    gram = torch.zeros(n, n, n, n, dtype=x.dtype)
    ar = torch.arange(n)
    gram[ar, :, ar, :] += torch.einsum("kjr,kir->kji", g, g)
    cross = torch.einsum("kjr,lr->kjl", g, c)  # g_kj . c_l
    kk, jj, ll = torch.meshgrid(ar, ar, ar, indexing="ij")
    gram[kk, jj, ll, kk] += cross
    gram[ll, kk, kk, jj] += cross
    gram += (c @ c.T).reshape(n, 1, n, 1) * torch.eye(n, dtype=x.dtype).reshape(1, n, 1, n)
    return gram.reshape(n * n, n * n)


def _move_matrix(lin: Linearisation) -> torch.Tensor:
    """``T^T T`` for ``T: N -> (sum_j N_kj (x_j - x_k))_k``, block diagonal ``(n^2, n^2)``."""
    x = lin.x
    diff = x.unsqueeze(0) - x.unsqueeze(1)  # [k, j] = x_j - x_k
    blocks = diff @ diff.transpose(1, 2)  # (n, n, n)
    return torch.block_diag(*blocks)


def mixing_constants(lin: Linearisation) -> tuple[float, float, float]:
    """``(sigma_min(K), ||K||_2, gamma)`` with ``gamma`` the smallest constant such that
    ``||T N|| <= gamma ||K N||`` (generalised eigenvalue of ``T^T T`` against ``K^T K``, raised
    by 1e-6 for rounding); ``gamma`` is inf when ``K`` is singular."""
    gram = mixing_gram(lin)
    ev = torch.linalg.eigvalsh(gram)
    u = float(torch.finfo(gram.dtype).eps) / 2
    lo = float(ev[0]) - 64 * gram.shape[0] * u * float(ev[-1])
    sigma, norm = math.sqrt(max(lo, 0.0)), math.sqrt(max(float(ev[-1]), 0.0))
    if sigma <= 0:
        return 0.0, norm, math.inf
    chol = torch.linalg.cholesky(gram)
    half = torch.linalg.solve_triangular(chol, _move_matrix(lin), upper=False)
    z = torch.linalg.solve_triangular(chol, half.T, upper=False)  # L^-1 T^T T L^-T
    gamma = math.sqrt(max(float(torch.linalg.eigvalsh((z + z.T) / 2)[-1]), 0.0))
    return sigma, norm, gamma * (1 + 1e-6)


def _label_gap(lin: Linearisation) -> float:
    """Smallest ``||q_{k,y_k} - q_{k,y'}||`` over samples and other labels."""
    own = lin.q.gather(1, lin.labels.reshape(-1, 1, 1).expand(-1, 1, lin.q.shape[2]))
    gaps = (own - lin.q).norm(dim=2)
    gaps[torch.arange(lin.n), lin.labels] = math.inf
    return float(gaps.min())


def span_core_bound(lin: Linearisation, a: float, tol: float, max_size: int) -> CoreBound:
    """The bound of the module docstring for the core ``lin``; ``a`` bounds ``||G' - G||_F``."""
    n = lin.n
    if n * n > max_size:
        return CoreBound(math.inf, 0.0, f"core of {n} samples too large ({n * n} > {max_size})")
    xt = torch.cat([lin.x, torch.ones(n, 1, dtype=lin.x.dtype)], dim=1)
    c = lin.coefficients()
    s_g = float(torch.linalg.svdvals(c.T @ xt)[n - 1]) if n <= xt.shape[1] else 0.0
    s_x = float(torch.linalg.svdvals(xt)[n - 1]) if n <= xt.shape[1] else 0.0
    if not s_g > 2 * a or s_x <= 0:
        return CoreBound(math.inf, 0.0, f"core span not resolved (sigma_n {s_g:.3g})")
    rho = float(lin.radius.min())
    sin = a / s_g
    s_norm = sin * float(((lin.xt_norm + rho) * lin.xt_norm).norm())  # ||s||_F
    delta = a / s_x  # R X~^+ = 0: R is orthogonal to the rows of X~
    qn = torch.linalg.matrix_norm(lin.q, ord=2)
    kappa = float((1.5 * qn * lin.m_norm**2).max())
    dc = float((qn * torch.linalg.matrix_norm(lin.jpm, ord=2)).max())
    sigma, norm, gamma = mixing_constants(lin)
    if not (sigma > 0 and math.isfinite(gamma)):
        return CoreBound(math.inf, 0.0, "core mixing map singular")
    # in tau = ||K N||: ||N|| <= tau / sigma, ||T N|| <= gamma tau, right side <= b0 + beta tau^2
    b0 = dc * s_norm + kappa * s_norm**2 + 2 * delta
    beta = kappa * gamma**2 + 2 * float(c.norm()) / sigma**2
    disc = 1 - 4 * b0 * beta
    if not disc > 0:
        return CoreBound(math.inf, 0.0, f"core mixing not locally unique (sigma {sigma:.3g})")
    tau1 = (1 - math.sqrt(disc)) / (2 * beta)
    tau2 = (1 + math.sqrt(disc)) / (2 * beta)
    gap = _label_gap(lin)
    tau_lab = (-1 + math.sqrt(1 + 4 * beta * (gap - b0))) / (2 * beta) if gap > b0 else 0.0
    tau_local = min(tau2 * (1 - 1e-9), 0.5 * sigma, tau_lab)
    error = gamma * tau1 + s_norm
    radius = min(rho, tau_local * s_x / max(norm, 1e-300))
    if not (tau1 <= tau_local and error <= tol and radius > error):
        return CoreBound(
            math.inf, 0.0, f"core bound {error:.3g} or radius {radius:.3g} misses tolerance {tol:g}"
        )
    return CoreBound(error, radius)
