"""The certificate of the samples no pivot row isolates (the *core*): a Kantorovich argument.

The core samples ``K`` share every row with another core sample, so no single row inverts
one of them. Their part of the first layer, ``F(X_K) = sum_k c_k(x_k) (x_k, 1)^T`` (every
row), must equal the update minus the pivot-chain samples, known up to ``a`` (residual,
rounding, and the chain samples' proven errors). On the product of the samples' activation
regions ``F`` is smooth; with ``J`` its Jacobian at the decoded core, ``sigma = sigma_min(J)``
and ``L`` a bound on its second derivative there, every core ``X'_K`` within Frobenius
distance ``t`` of ``X_K`` that reproduces the update satisfies ``sigma t - L t^2 / 2 <= a``.
When ``2 L a < sigma^2`` this confines ``t`` to ``[0, t_1]`` (``t_1 <= 2 a / sigma``) or
``t >= t_2 = (sigma + sqrt(sigma^2 - 2 L a)) / L``: inside the radius ``t_2`` the core is
unique up to ``t_1``. A relabelling ``Y'`` adds ``sum_k (q_{k,y_k} - q_{k,y'_k}) (x_k, 1)^T``,
of norm at least ``(sigma_min(X~_K) - t) min ||q_y - q_y'||``, which excludes it while that
exceeds ``a + ||J|| t + L t^2 / 2``.

``sigma`` is computed exactly: with ``S`` the span of the rows of every ``Jp_k M_k`` and of
every ``x_k``, ``J^T J`` splits into its restriction to ``S^|K|`` (assembled here, of size
``|K| dim S``) and ``C C^T`` (``C`` the core's coefficient matrix) on the orthogonal rest.
Near-duplicate samples make ``sigma`` small (exact duplicates make it zero), which is what
refuses them.

References:
    Kantorovich, Akilov, *Functional Analysis*, 1982, Ch. XVIII (Newton-Kantorovich).
    Ortega, Rheinboldt, *Iterative Solution of Nonlinear Equations in Several Variables*,
    1970, Sec. 12.6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trainleak.attacks.gradient._linearisation import Linearisation


@dataclass(frozen=True)
class CoreBound:
    """What the Kantorovich argument proves about the core.

    Attributes:
        error: bound ``t_1`` on the Frobenius distance of the true core from the decoded one
            (inf when nothing is proven).
        radius: the radius inside which that holds, labels included.
        reason: why nothing is proven (empty when ``error`` is finite).
    """

    error: float
    radius: float
    reason: str = ""


def _span_basis(lin: Linearisation) -> torch.Tensor:
    """Orthonormal basis ``(d, s)`` of a space holding every ``Jp_k M_k`` row and every ``x_k``."""
    rows = torch.cat([lin.jpm.reshape(-1, lin.x.shape[1]), lin.x], dim=0)
    if rows.shape[0] >= rows.shape[1]:
        return torch.eye(int(rows.shape[1]), dtype=rows.dtype)
    q, _ = torch.linalg.qr(rows.T, mode="reduced")
    return q


def _reduced_gram(lin: Linearisation, basis: torch.Tensor) -> torch.Tensor:
    """``J^T J`` restricted to perturbations in ``span(basis)`` for every sample."""
    n, s = lin.n, int(basis.shape[1])
    a = lin.jpm @ basis  # (n, C, s): the gradient of c_kr along the basis is q_kr^T a_k
    xi = lin.x @ basis  # (n, s)
    xin = torch.cat([xi, torch.ones(n, 1, dtype=xi.dtype)], dim=1)
    c = lin.coefficients()  # (n, m')
    h = torch.einsum("icr,kdr->ikcd", lin.q, lin.q)
    gram = torch.einsum("ics,ikcd,kdt->iskt", a, h, a) * (xin @ xin.T).reshape(n, 1, n, 1)
    cross = torch.einsum("ics,ikc->iks", a, torch.einsum("icr,kr->ikc", lin.q, c))
    gram = gram + torch.einsum("ika,ib->iakb", cross, xi)
    gram = gram + torch.einsum("ka,kib->iakb", xi, cross)
    eye = torch.eye(s, dtype=xi.dtype)
    gram = gram + (c @ c.T).reshape(n, 1, n, 1) * eye.reshape(1, s, 1, s)
    return gram.reshape(n * s, n * s)


def jacobian_extremes(lin: Linearisation) -> tuple[float, float]:
    """``(sigma_min(J), ||J||_2)`` of the core's first-layer map at the decoded samples.

    The smallest eigenvalue is lowered by a rounding margin (``64 N u ||J^T J||`` for an
    ``N``-square Gram matrix) before its square root is taken.
    """
    d = int(lin.x.shape[1])
    basis = _span_basis(lin)
    gram = _reduced_gram(lin, basis)
    ev = torch.linalg.eigvalsh(gram)
    lo, hi = float(ev[0]), float(ev[-1])
    if basis.shape[1] < d:
        c = lin.coefficients()
        cev = torch.linalg.eigvalsh(c @ c.T)
        lo, hi = min(lo, float(cev[0])), max(hi, float(cev[-1]))
    u = float(torch.finfo(gram.dtype).eps) / 2
    lo -= 64 * gram.shape[0] * u * hi
    return math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0))


def _second_derivative(lin: Linearisation, rho: float) -> float:
    """Bound ``L`` of the second derivative of ``F`` on balls of radius ``rho``:
    ``3/2 ||Q_k|| ||M_k||^2 (||x~_k|| + rho) + 2 ||Q_k|| (||Jp M_k|| + 3/2 ||M_k||^2 rho)``."""
    qn = torch.linalg.matrix_norm(lin.q, ord=2)
    jm = torch.linalg.matrix_norm(lin.jpm, ord=2)
    m2 = lin.m_norm**2
    per = 1.5 * qn * m2 * (lin.xt_norm + rho) + 2 * qn * (jm + 1.5 * m2 * rho)
    return float(per.max())


def core_bound(lin: Linearisation, a: float, tol: float, max_size: int) -> CoreBound:
    """Kantorovich bound of the core ``lin`` given the size ``a`` of its right side's error.

    Args:
        lin: the core samples.
        a: Frobenius bound of everything the core's rows hold besides the core.
        tol: the input tolerance the error must meet.
        max_size: largest reduced Gram matrix (``|K| dim S``) to assemble.
    """
    n, d = lin.n, int(lin.x.shape[1])
    size = n * min(d, n * (int(lin.q.shape[1]) + 1))
    if size > max_size:
        return CoreBound(math.inf, 0.0, f"core of {n} samples too large ({size} > {max_size})")
    sigma, norm = jacobian_extremes(lin)
    rho = float(lin.radius.min())
    big_l = max(_second_derivative(lin, rho), 1e-300)
    disc = sigma**2 - 2 * big_l * a
    if not disc > 0:
        return CoreBound(math.inf, 0.0, f"core not locally unique (sigma_min {sigma:.3g})")
    t1 = 2 * a / (sigma + math.sqrt(disc))
    t2 = (sigma + math.sqrt(disc)) / big_l
    radius = min(rho, t2 * (1 - 1e-9), _label_radius(lin, a, norm, big_l))
    if not (t1 <= tol and radius > t1):
        return CoreBound(
            math.inf, 0.0, f"core bound {t1:.3g} or radius {radius:.3g} misses tolerance {tol:g}"
        )
    return CoreBound(t1, radius)


def _label_radius(lin: Linearisation, a: float, norm: float, big_l: float) -> float:
    """Largest ``t`` with ``(sigma_min(X~) - t) min ||q_y - q_y'|| > a + ||J|| t + L t^2 / 2``."""
    xt = torch.cat([lin.x, torch.ones(lin.n, 1, dtype=lin.x.dtype)], dim=1)
    sx = float(torch.linalg.svdvals(xt).min())
    gaps = lin.q.gather(1, lin.labels.reshape(-1, 1, 1).expand(-1, 1, lin.q.shape[2])) - lin.q
    gnorm = gaps.norm(dim=2)  # (n, C)
    gnorm[torch.arange(lin.n), lin.labels] = math.inf
    dmin = float(gnorm.min())
    b = norm + dmin
    c0 = a - sx * dmin
    if c0 >= 0:
        return 0.0
    return (-b + math.sqrt(b * b - 2 * big_l * c0)) / big_l
