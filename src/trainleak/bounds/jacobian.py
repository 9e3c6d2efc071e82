"""Update-Jacobian theory of federated leakage (seed 17): when is a batch determined by its update?

A client's update ``U(X)`` (one gradient step, or several local steps) is a map from the batch
``X`` in ``R^{B x p}`` to ``R^d``. Its Jacobian ``J = dU / dvec(X)`` has rank at most ``d``.
When ``rank J < B p`` at ``X``, the constant-rank theorem gives a manifold of batches
``X' != X`` through ``X`` with ``U(X') = U(X)``, of dimension ``B p - rank J``: exact
reconstruction is not unique. Since ``rank J <= d``, ``B p > d`` (``B > d / p``) suffices.

The second result bounds the leakage ``eps_p = 1 - E[mean_{i,t} |x~_ti - x_i| / D_max]`` of an
attacker with self-bounded regret against an update distorted by ``Delta``:

    eps_p <= 1 + sqrt((ln 2 + poly(B)) / (2 B)) - c_a Delta / (2 D_max),

with ``c_a`` the lower bi-Lipschitz constant of the per-sample gradient map. The summary we
could read does not give ``poly``; it is an explicit parameter here (``poly_coeff *
B ** poly_degree``) [inferred].

References:
    Zhang & Chen, *Theoretical Analysis of Privacy Leakage in Trustworthy Federated Learning:
    A Perspective from Linear Algebra and Optimization Theory*, arXiv 2407.16735 (2024),
    Theorems on the Jacobian rank and on the leakage upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, jacrev

from trainleak.bounds.base import BoundResult
from trainleak.errors import ConfigError, ShapeError
from trainleak.models.functional import per_sample_gradients
from trainleak.validation import check_positive


def _flat_update(
    model: nn.Module,
    x_flat: torch.Tensor,
    y: torch.Tensor,
    shape: Sequence[int],
    local_steps: int,
    lr: float,
) -> torch.Tensor:
    """``U(X)``: the batch gradient (one step) or ``(theta_0 - theta_K) / lr`` (K steps)."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = x_flat.reshape(-1, *shape)

    def loss_of(theta: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, theta, (x,)), y)

    theta = params
    for _ in range(local_steps):
        grads = grad(loss_of)(theta)
        theta = {k: v - lr * grads[k] for k, v in theta.items()}
    return torch.cat([(params[k] - theta[k]).reshape(-1) for k in params]) / lr


def update_jacobian(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    local_steps: int = 1,
    lr: float = 1.0,
) -> torch.Tensor:
    """The Jacobian of the client update with respect to the batch, ``(d, B p)``.

    Args:
        model: the model (its dtype is used; float64 recommended for ranks).
        x: the batch ``(B, *input_shape)``.
        y: labels ``(B,)``.
        local_steps: 1 for FedSGD; K for FedAvg with full-batch local steps.
        lr: the local learning rate (the update is rescaled by ``1 / lr``).

    Returns:
        ``J`` with ``J[k, j] = d U_k / d vec(X)_j``.
    """
    if local_steps < 1:
        raise ConfigError.invalid("local_steps", "a positive integer", local_steps)
    check_positive("lr", lr)
    dtype = next(model.parameters()).dtype
    shape = tuple(x.shape[1:])
    flat = x.detach().reshape(-1).to(dtype)
    jac = jacrev(lambda v: _flat_update(model, v, y, shape, local_steps, lr))(flat)
    return jac.detach()


def numerical_rank(j: torch.Tensor, rtol: float | None = None) -> tuple[int, torch.Tensor]:
    """Rank of ``j`` by singular values above ``rtol * s_max`` (default ``max(m, n) * eps``)."""
    s = torch.linalg.svdvals(j)
    tol = rtol if rtol is not None else max(j.shape) * torch.finfo(j.dtype).eps
    return int((s > tol * s[0]).sum()) if s.numel() else 0, s


def batch_size_threshold(d: int, p: int) -> int:
    """Smallest ``B`` with ``B p > d``: from here on the update cannot determine the batch."""
    if d < 1 or p < 1:
        raise ConfigError.invalid("(d, p)", "positive integers", (d, p))
    return d // p + 1


@dataclass(frozen=True)
class UniquenessReport:
    """The rank criterion at one batch.

    Attributes:
        d: number of update entries.
        batch_size: B.
        input_dim: p.
        rank: numerical rank of the update Jacobian.
        null_dim: ``B p - rank`` (dimension of the manifold of colliding batches).
        sufficient: ``B p > d`` (non-uniqueness guaranteed by counting alone).
        non_unique: ``rank < B p`` (non-uniqueness at this batch).
        threshold: :func:`batch_size_threshold` of ``(d, p)``.
    """

    d: int
    batch_size: int
    input_dim: int
    rank: int
    null_dim: int
    sufficient: bool
    non_unique: bool
    threshold: int


def nonuniqueness_certificate(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, rtol: float | None = None
) -> UniquenessReport:
    """Evaluate the Jacobian criterion at ``(x, y)`` (FedSGD)."""
    j = update_jacobian(model, x, y)
    rank, _ = numerical_rank(j, rtol)
    b, p = int(x.shape[0]), int(x[0].numel())
    d = int(j.shape[0])
    return UniquenessReport(
        d=d,
        batch_size=b,
        input_dim=p,
        rank=rank,
        null_dim=b * p - rank,
        sufficient=b * p > d,
        non_unique=rank < b * p,
        threshold=batch_size_threshold(d, p),
    )


@dataclass(frozen=True)
class Collision:
    """Two different batches with the same update.

    Attributes:
        x: the colliding batch ``X'``.
        update_gap: ``|U(X') - U(X)| / |U(X)|``.
        distance: ``|X' - X| / |X|``.
        steps: Gauss-Newton corrections used.
    """

    x: torch.Tensor
    update_gap: float
    distance: float
    steps: int


def find_collision(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    step: float = 0.3,
    newton_steps: int = 8,
    tol: float = 1e-12,
    box: tuple[float, float] | None = None,
    generator: torch.Generator | None = None,
) -> Collision:
    """A constructive witness: move ``X`` along the Jacobian's null space, then correct.

    A random unit direction in the null space of ``J`` is scaled to ``step * |X|``; then
    Gauss-Newton steps ``X' <- X' - J(X')^+ (U(X') - U(X))`` pull the update back to ``U(X)``
    while staying close to the new point (minimum-norm corrections). With ``box`` only the
    entries strictly inside the box move, and the step is shortened to stay inside, so the
    witness is a valid batch of the data domain. ReLU kinks can stall the correction; the
    move is then retried three times, each a third as long.

    Args:
        model: the model (float64 recommended).
        x: the batch.
        y: its labels.
        step: size of the null-space move relative to ``|X|``.
        newton_steps: most corrections per try.
        tol: stop when the relative update gap falls below this.
        box: the data domain ``(low, high)``, or ``None`` for no constraint.
        generator: randomness of the direction.

    Returns:
        The :class:`Collision` of the last try (check ``update_gap`` and ``distance``).

    Raises:
        ShapeError: the Jacobian restricted to the free entries has full column rank (the
            batch is locally unique there).
    """
    x0 = x.detach().reshape(-1).to(next(model.parameters()).dtype)
    free = torch.ones_like(x0, dtype=torch.bool)
    if box is not None:
        free = (x0 > box[0] + 1e-9) & (x0 < box[1] - 1e-9)
    target = _flat_update(model, x0, y, tuple(x.shape[1:]), 1, 1.0).detach()
    direction = _null_direction(update_jacobian(model, x, y), free, generator)
    size = step * float(x0.norm())
    if box is not None:
        room = torch.where(direction > 0, box[1] - x0, x0 - box[0]) / direction.abs()
        size = min(size, 0.5 * float(room[direction != 0].min()))
    best: Collision | None = None
    for _ in range(4):
        xn, used = _gauss_newton(
            model, x0 + size * direction, y, x.shape, target, free, newton_steps, tol
        )
        gap = _flat_update(model, xn, y, tuple(x.shape[1:]), 1, 1.0).detach() - target
        best = Collision(
            x=xn.reshape(x.shape),
            update_gap=float(gap.norm() / target.norm()),
            distance=float((xn - x0).norm() / x0.norm()),
            steps=used,
        )
        if best.update_gap <= 1e-8:
            break
        size /= 3
    if best is None:
        raise RuntimeError("no candidate pair was evaluated")
    return best


def _null_direction(
    j: torch.Tensor, free: torch.Tensor, generator: torch.Generator | None
) -> torch.Tensor:
    """A random unit vector of the null space of ``J`` restricted to the ``free`` entries."""
    jf = j[:, free]
    rank, _ = numerical_rank(jf)
    if rank >= jf.shape[1]:
        raise ShapeError(f"the update Jacobian has full column rank {rank}: X is locally unique")
    _, _, vh = torch.linalg.svd(jf, full_matrices=True)
    coef = torch.randn(vh.shape[0] - rank, generator=generator, dtype=j.dtype)
    direction = torch.zeros(j.shape[1], dtype=j.dtype)
    direction[free] = coef @ vh[rank:]
    return direction / direction.norm()


def _gauss_newton(
    model: nn.Module,
    xn: torch.Tensor,
    y: torch.Tensor,
    shape: torch.Size,
    target: torch.Tensor,
    free: torch.Tensor,
    steps: int,
    tol: float,
) -> tuple[torch.Tensor, int]:
    for used in range(steps + 1):
        gap = _flat_update(model, xn, y, tuple(shape[1:]), 1, 1.0).detach() - target
        if used == steps or float(gap.norm()) <= tol * float(target.norm()):
            return xn, used
        jn = update_jacobian(model, xn.reshape(shape), y)[:, free]
        corr = torch.linalg.lstsq(jn, gap.unsqueeze(1), driver="gelsd").solution.squeeze(1)
        xn = xn.clone()
        xn[free] -= corr
    return xn, steps


def leakage_metric(x: torch.Tensor, trajectory: Sequence[torch.Tensor], diameter: float) -> float:
    """Empirical ``eps_p = 1 - mean_{t, i} |x~_ti - x_i| / D_max`` over an attack's iterates."""
    check_positive("diameter", diameter)
    if not trajectory:
        raise ConfigError.invalid("trajectory", "at least one iterate", 0)
    b = x.shape[0]
    dists = [(it.reshape(b, -1) - x.reshape(b, -1)).norm(dim=1).mean().item() for it in trajectory]
    return 1.0 - sum(dists) / (len(dists) * diameter)


def leakage_upper_bound(
    batch_size: int,
    distortion: float,
    c_a: float,
    diameter: float,
    *,
    poly_coeff: float = 1.0,
    poly_degree: float = 1.0,
) -> BoundResult:
    """Upper bound on the leakage ``eps_p`` (Zhang & Chen 2024, optimisation view).

    ``eps_p <= 1 + sqrt((ln 2 + poly(B)) / (2 B)) - c_a * Delta / (2 D_max)`` with
    ``poly(B) = poly_coeff * B ** poly_degree``; the polynomial is left open by the paper's
    summary, so its two constants are explicit. The value is not clipped to [0, 1]; the
    components say when it is vacuous.

    Args:
        batch_size: B.
        distortion: Delta, the norm of the client's distortion of its update.
        c_a: lower bi-Lipschitz constant of the per-sample gradient map in x.
        diameter: D_max, the data diameter.
        poly_coeff: constant of the batch-size polynomial.
        poly_degree: its degree.

    Returns:
        A :class:`BoundResult` of kind ``"upper"`` with every term.
    """
    if batch_size < 1:
        raise ConfigError.invalid("batch_size", "a positive integer", batch_size)
    check_positive("distortion", distortion, allow_zero=True)
    check_positive("c_a", c_a, allow_zero=True)
    check_positive("diameter", diameter)
    poly = poly_coeff * batch_size**poly_degree
    batch_term = math.sqrt((math.log(2) + poly) / (2 * batch_size))
    distortion_term = c_a * distortion / (2 * diameter)
    value = 1.0 + batch_term - distortion_term
    return BoundResult(
        value=value,
        unit="leakage eps_p (1 = exact reconstruction)",
        kind="upper",
        components={
            "batch_term": batch_term,
            "distortion_term": distortion_term,
            "poly": poly,
            "vacuous": value >= 1.0,
        },
        assumptions=(
            "per-sample gradient map bi-Lipschitz in x with lower constant c_a; attacker with "
            "self-bounded regret; poly(B) = poly_coeff * B**poly_degree is a free parameter"
        ),
    )


def lower_lipschitz_estimate(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    pairs: int = 64,
    generator: torch.Generator | None = None,
) -> float:
    """Estimate ``c_a = min |g(x) - g(x')| / |x - x'|`` over random same-label sample pairs.

    A minimum over sampled pairs is at least the infimum, so it can overstate ``c_a`` (and
    understate the leakage bound): it is an estimate, not a certificate. For softmax regression
    :func:`certified_lower_lipschitz_softmax` gives a provable constant.
    """

    dtype = next(model.parameters()).dtype
    g = per_sample_gradients(model, x.to(dtype), y)
    flat = torch.cat([v.reshape(v.shape[0], -1) for v in g.values()], dim=1)
    xf = x.reshape(x.shape[0], -1).to(dtype)
    n = x.shape[0]
    i = torch.randint(0, n, (pairs,), generator=generator)
    k = torch.randint(0, n, (pairs,), generator=generator)
    keep = (i != k) & (y[i] == y[k])
    if not bool(keep.any()):
        raise ConfigError.invalid("x", "at least two samples sharing a label", n)
    num = (flat[i[keep]] - flat[k[keep]]).norm(dim=1)
    den = (xf[i[keep]] - xf[k[keep]]).norm(dim=1).clamp_min(1e-300)
    return float((num / den).min())


def certified_lower_lipschitz_softmax(
    weight: torch.Tensor, bias: torch.Tensor, box: tuple[float, float] = (0.0, 1.0)
) -> float:
    """A provable lower constant ``c_a`` of the per-sample gradient map of softmax regression.

    For cross-entropy on logits ``W x + b`` the per-sample gradient is ``g(x) = (r x^T, r)``
    with ``r = softmax(W x + b) - e_y``. For two inputs with the same label,
    ``r (x - x')^T = (r x^T - r' x'^T) - (r - r') x'^T``, so
    ``|r| |x - x'| <= |g - g'| (1 + |x'|)`` and

        |g(x) - g(x')| / |x - x'| >= (1 - p_y(x)) / (1 + max |x'|).

    Over the box ``[lo, hi]^p``, ``1 - p_y >= S / (1 + S)`` with ``S = sum_{k != y}
    exp(min_box (z_k - z_y))`` (an affine minimum over a box is exact). The minimum over labels
    holds for every same-label pair in the box (up to float64 rounding), unlike
    :func:`lower_lipschitz_estimate`. ``weight`` is ``(C, p)``, ``bias`` ``(C,)``, ``box`` the
    range of every input coordinate.
    """
    lo, hi = box
    if not lo < hi:
        raise ConfigError.invalid("box", "lo < hi", box)
    if weight.ndim != 2 or bias.shape != (weight.shape[0],) or weight.shape[0] < 2:
        raise ShapeError(
            f"expected weight (C, p) with C >= 2 and bias (C,), got {tuple(weight.shape)} and "
            f"{tuple(bias.shape)}"
        )
    w, b = weight.detach().double(), bias.detach().double()
    c = w.shape[0]
    radius = math.sqrt(w.shape[1] * max(lo * lo, hi * hi))
    worst = math.inf
    for y in range(c):
        dw, db = w - w[y], b - b[y]
        m = db + torch.minimum(lo * dw, hi * dw).sum(1)  # min over the box of z_k - z_y
        s = float(torch.exp(m[torch.arange(c) != y]).sum())
        worst = min(worst, s / (1.0 + s))
    return worst / (1.0 + radius)
