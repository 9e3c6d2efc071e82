"""Per-record leakage of DP-SGD in nats, and (epsilon, delta) from Opacus's RDP accountant.

The informed adversary of the rate-distortion bound sees the whole parameter trajectory
theta_0 .. theta_T and knows every other record D_-. After subtracting the known contributions
and dividing by the noise scale sigma*C, step t is the channel

    Y_t = B_t * u_t(Z) + N(0, I),   B_t ~ Bernoulli(q_t),   ||u_t|| <= 1 / sigma_t,

where u_t(Z) is the target's clipped gradient at theta_t (a function of the past outputs). The
chain rule gives I(Z; Theta | D_-) <= sum_t l(q_t, sigma_t) for any per-step bound l on
sup_{P_U} I(U; B U + N). Three such bounds are implemented; each is a proven upper bound:

* ``capacity``: l = q / (2 sigma^2). I(U; BU + N) <= I(BU; BU + N) <= E||BU||^2 / 2 (Gaussian
  channel capacity, Cover & Thomas, Thm. 9.4.1, with log(1 + x) <= x).
* ``kl_null``: l = KL((1-q) N(0,1) + q N(1/sigma, 1) || N(0,1)). For any Q,
  I(U; Y) <= E_U KL(P_{Y|U} || Q) (the "golden formula", Csiszar & Korner 2011, Lemma 8.5);
  Q = N(0, I) and rotation invariance make it one-dimensional, and it is non-decreasing in the
  shift a = ||u|| because the kernel x -> (a'/a) x + N(0, 1 - (a'/a)^2) maps the shift-a pair
  onto the shift-a' pair (data processing), so the supremum sits at a = 1/sigma. Computed by
  adaptive quadrature; the quadrature's error estimate is added, so the value stays an upper
  bound.
* ``chi2``: l = log(1 + q^2 (exp(1/sigma^2) - 1)). KL <= log(1 + chi^2) by Jensen, and the
  chi^2 divergence of the mixture to N(0,1) is q^2 (exp(a^2) - 1). It upper-bounds ``kl_null``.

``kl_null`` is therefore never larger than the other two (it is below ``capacity`` by
convexity of KL in its first argument); ``best`` takes the minimum of all three per step, which
is valid because each is.

References:
    Cover & Thomas, *Elements of Information Theory*, 2nd ed., 2006, Ch. 9.
    Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016 (DP-SGD).
    Mironov, Talwar & Zhang, *Renyi Differential Privacy of the Sampled Gaussian Mechanism*,
    arXiv 1908.10530, 2019 (the accountant Opacus implements).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Protocol

import numpy as np
import torch
from scipy import integrate

from trainleak.bounds.base import BoundResult
from trainleak.bounds.entropy import (
    BlockKind,
    block_distortion_bound,
    finite_pool_bound,
    make_blocks,
)
from trainleak.errors import ConfigError, import_extra
from trainleak.validation import check_choice, check_in_range, check_positive

LeakageMethod = Literal["capacity", "kl_null", "chi2", "best"]
LEAKAGE_METHODS: tuple[str, ...] = ("capacity", "kl_null", "chi2", "best")


class FeatureMapLike(Protocol):
    """What the feature-space bound needs from a feature map.

    See :mod:`trainleak.metrics.features`.
    """

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...

    def coordinate_scale(self) -> torch.Tensor: ...


@dataclass(frozen=True)
class Schedule:
    """A DP-SGD schedule: per-phase sampling rate, noise multiplier and number of steps.

    Attributes:
        sampling_rates: Poisson sampling rate q of each phase, in (0, 1].
        noise_multipliers: noise multiplier sigma of each phase (> 0).
        steps: number of steps of each phase (>= 1).
    """

    sampling_rates: tuple[float, ...]
    noise_multipliers: tuple[float, ...]
    steps: tuple[int, ...]

    def __post_init__(self) -> None:
        n = len(self.steps)
        if n == 0 or len(self.sampling_rates) != n or len(self.noise_multipliers) != n:
            raise ConfigError.invalid(
                "schedule",
                "equally long, non-empty sequences of sampling rates, noise multipliers, steps",
                (len(self.sampling_rates), len(self.noise_multipliers), n),
            )
        for q in self.sampling_rates:
            check_in_range("sampling_rate", q, 0.0, 1.0, closed="(]")
        for s in self.noise_multipliers:
            check_positive("noise_multiplier", s)
        for t in self.steps:
            if int(t) != t or t < 1:
                raise ConfigError.invalid("steps", "an integer >= 1", t)

    @classmethod
    def constant(cls, sampling_rate: float, noise_multiplier: float, steps: int) -> Schedule:
        """One phase of ``steps`` steps at fixed (q, sigma)."""
        return cls((float(sampling_rate),), (float(noise_multiplier),), (int(steps),))

    @property
    def total_steps(self) -> int:
        """T, the number of noisy steps."""
        return int(sum(self.steps))


def _mixture_kl_integrand(x: float, q: float, a: float) -> float:
    # E_Q[r log r] with r(x) = (1 - q) + q exp(a x - a^2 / 2), Q = N(0, 1)
    r = (1.0 - q) + q * math.exp(a * x - 0.5 * a * a)
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi) * r * math.log(r)


@lru_cache(maxsize=4096)
def kl_null_step(q: float, sigma: float) -> float:
    """KL((1-q) N(0,1) + q N(1/sigma, 1) || N(0,1)) in nats, plus the quadrature error.

    Args:
        q: sampling rate in (0, 1].
        sigma: noise multiplier (> 0).

    Returns:
        An upper bound on the per-step leakage (see the module docstring).
    """
    a = 1.0 / sigma
    if q == 1.0:
        return 0.5 * a * a
    # the integrand is negligible 12 standard deviations beyond both modes
    lo, hi = -12.0, a + 12.0
    value, err = integrate.quad(
        _mixture_kl_integrand, lo, hi, args=(q, a), epsabs=1e-14, epsrel=1e-10, limit=200
    )
    tail = 2e-30  # mass outside [lo, hi] under both mixture components is below this
    return float(max(value, 0.0) + abs(err) + tail)


def step_leakage(q: float, sigma: float, method: LeakageMethod = "best") -> float:
    """Upper bound on the information one DP-SGD step leaks about one record, in nats.

    Args:
        q: Poisson sampling rate in (0, 1].
        sigma: noise multiplier (> 0).
        method: ``capacity``, ``kl_null``, ``chi2`` or ``best`` (their minimum).

    Returns:
        The per-step bound l(q, sigma).

    Raises:
        ConfigError: q outside (0, 1], sigma <= 0, or an unknown method.

    Example:
        >>> round(step_leakage(0.005, 1.1, "capacity") * 2000, 2)
        4.13
        >>> step_leakage(0.01, 1.0, "kl_null") <= step_leakage(0.01, 1.0, "chi2")
        True
    """
    check_in_range("sampling_rate", q, 0.0, 1.0, closed="(]")
    check_positive("noise_multiplier", sigma)
    check_choice("leakage_method", method, LEAKAGE_METHODS)
    inv = 1.0 / (sigma * sigma)
    capacity = q * inv / 2.0
    chi2 = math.log1p(q * q * math.expm1(inv)) if inv < 700 else math.inf
    if method == "capacity":
        return capacity
    if method == "chi2":
        return chi2
    kl = kl_null_step(float(q), float(sigma))
    if method == "kl_null":
        return kl
    return min(capacity, chi2, kl)


def dpsgd_leakage(schedule: Schedule, method: LeakageMethod = "best") -> float:
    """Upper bound on I(Z; theta_0..T | D_-) in nats over a whole DP-SGD schedule.

    Args:
        schedule: the DP-SGD schedule.
        method: per-step bound, see :func:`step_leakage`.

    Returns:
        sum_t l(q_t, sigma_t).

    Example:
        >>> s = Schedule.constant(0.005, 1.1, 2000)
        >>> round(dpsgd_leakage(s, "chi2"), 3)
        0.064
    """
    return float(
        sum(
            t * step_leakage(q, s, method)
            for q, s, t in zip(schedule.sampling_rates, schedule.noise_multipliers, schedule.steps)
        )
    )


def leakage_components(schedule: Schedule) -> dict[str, float]:
    """All three leakage bounds and the chosen (smallest) one, in nats."""
    out = {f"leakage_{m}": dpsgd_leakage(schedule, m) for m in ("capacity", "kl_null", "chi2")}  # type: ignore[arg-type]
    out["leakage"] = min(out.values())
    return out


def dpsgd_epsilon(schedule: Schedule, delta: float, orders: Sequence[float] | None = None) -> float:
    """Epsilon at ``delta`` from Opacus's RDP accountant (Mironov, Talwar & Zhang 2019).

    Args:
        schedule: the DP-SGD schedule.
        delta: target delta in (0, 1).
        orders: RDP orders (default: Opacus's default orders).

    Returns:
        The (epsilon, delta)-DP epsilon under add/remove-one neighbouring.

    Raises:
        ConfigError: delta outside (0, 1).
        ImportError: Opacus is not installed (``pip install 'trainleak[dp]'``).
    """
    check_in_range("delta", delta, 0.0, 1.0, closed="()")
    rdp_mod, accountant = _opacus_rdp()
    alphas = list(orders) if orders is not None else list(accountant.DEFAULT_ALPHAS)
    total = np.zeros(len(alphas))
    for q, s, t in zip(schedule.sampling_rates, schedule.noise_multipliers, schedule.steps):
        total += np.asarray(
            rdp_mod.compute_rdp(q=q, noise_multiplier=s, steps=t, orders=alphas), dtype=float
        )
    eps, _ = rdp_mod.get_privacy_spent(orders=alphas, rdp=total.tolist(), delta=delta)
    return float(eps)


def renyi2_epsilon(schedule: Schedule) -> float:
    """Renyi-DP epsilon at order 2 with hard clipping: sum_t log(1 + q^2 (e^{1/sigma^2} - 1)).

    This is the quantity Guo et al. (2022) plug into their MSE bound (see
    :mod:`trainleak.bounds.published`).
    """
    return dpsgd_leakage(schedule, "chi2")


def _opacus_rdp():  # type: ignore[no-untyped-def]
    accountants = import_extra("opacus.accountants", "dp", "the DP accountant")
    analysis = import_extra("opacus.accountants.analysis", "dp", "the DP accountant")
    return analysis.rdp, accountants.RDPAccountant


def noise_for_epsilon(
    epsilon: float, sampling_rate: float, steps: int, delta: float, *, tol: float = 1e-4
) -> float:
    """The noise multiplier at which ``steps`` steps at ``sampling_rate`` reach ``epsilon``.

    Bisection on :func:`dpsgd_epsilon`, which decreases in sigma.

    Args:
        epsilon: target epsilon (> 0).
        sampling_rate: q in (0, 1].
        steps: number of steps.
        delta: target delta.
        tol: relative tolerance on sigma.

    Returns:
        sigma with epsilon(sigma) <= ``epsilon`` (the upper end of the final bracket).
    """
    check_positive("epsilon", epsilon)
    lo, hi = 0.05, 1.0
    while dpsgd_epsilon(Schedule.constant(sampling_rate, hi, steps), delta) > epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e4:
            raise ConfigError.invalid("epsilon", "a value reachable with sigma <= 1e4", epsilon)
    while (hi - lo) / hi > tol:
        mid = 0.5 * (lo + hi)
        if dpsgd_epsilon(Schedule.constant(sampling_rate, mid, steps), delta) > epsilon:
            lo = mid
        else:
            hi = mid
    return hi


REPRESENTATIONS: tuple[str, ...] = ("pixel", "features")


def dpsgd_distortion_bound(
    schedule: Schedule,
    samples: torch.Tensor,
    *,
    representation: str = "pixel",
    feature_map: FeatureMapLike | None = None,
    blocks: BlockKind = "patches",
    patch: int = 2,
    confidence: float = 0.05,
    delta: float = 1e-5,
    exact_prior: bool = False,
    leakage_method: LeakageMethod = "best",
) -> BoundResult:
    """Lower bound on the expected distortion of any reconstruction of one DP-SGD record.

    The bound is computed before training, from the schedule and a data sample only:
    leakage L >= I(Z; trajectory | D_-) (:func:`dpsgd_leakage`), then per block b of phi(Z)
    the larger of the lattice Shannon lower bound and the Donsker-Varadhan bound at L, summed
    over blocks (:func:`~trainleak.bounds.entropy.block_distortion_bound`). With
    ``exact_prior`` the prior is the uniform distribution over ``samples`` (the setting of the
    prior-aware attacks), which also allows the vector bound over the pool
    (:func:`~trainleak.bounds.entropy.finite_prior_bound`); the larger value is reported.

    Args:
        schedule: the DP-SGD schedule (q_t, sigma_t, T).
        samples: ``(n, C, H, W)`` samples of the population in [0, 1].
        representation: ``pixel`` (phi = identity) or ``features`` (phi = ``feature_map``).
        feature_map: required for ``features``; see :mod:`trainleak.metrics.features`.
        blocks: ``patches`` or ``coordinates`` (pixel representation).
        patch: patch side for ``patches``.
        confidence: failure probability of the sample-based estimates (ignored with
            ``exact_prior``).
        delta: the delta at which epsilon is reported (x-axis only).
        exact_prior: the prior is exactly uniform over ``samples``.
        leakage_method: per-step leakage bound.

    Returns:
        A lower :class:`BoundResult` in squared-error units per coordinate of phi, with every
        component (leakage forms, epsilon, SLB and DV totals, entropy estimates, prior
        variance, PSNR ceiling and fraction of the prior variance).

    Raises:
        ConfigError: an unknown representation, a missing feature map, too few samples for
            ``confidence``, or invalid schedule values.
    """
    if representation not in REPRESENTATIONS:
        raise ConfigError.invalid(
            "representation", f"one of {list(REPRESENTATIONS)}", representation
        )
    check_in_range("confidence", confidence, 0.0, 1.0, closed="()")
    if samples.ndim != 4:
        raise ConfigError.invalid("samples", "a (n, C, H, W) tensor", tuple(samples.shape))
    leak = leakage_components(schedule)
    chosen = dpsgd_leakage(schedule, leakage_method)
    x = samples.detach().double().flatten(1).numpy()
    if representation == "pixel":
        parts = block_distortion_bound(
            x,
            chosen,
            make_blocks(tuple(samples.shape[1:]), blocks, patch),
            delta=confidence,
            value_range=(0.0, 1.0),
            exact_prior=exact_prior,
        )
        feats = x
    else:
        if feature_map is None:
            raise ConfigError.invalid("feature_map", "a feature map for 'features'", None)
        with torch.no_grad():
            feats_t = feature_map(samples.float()).double()
        scale = feature_map.coordinate_scale().double().numpy()
        feats = feats_t.numpy()
        parts = block_distortion_bound(
            feats / scale,
            chosen,
            [np.array([j]) for j in range(feats.shape[1])],
            delta=confidence,
            value_range=(-1.0, 1.0),
            exact_prior=exact_prior,
            weights=scale**2,
        )
    parts["general"] = parts["total"]
    if exact_prior:
        parts["finite_pool"] = finite_pool_bound(feats, chosen)
        parts["total"] = max(parts["total"], parts["finite_pool"])
    return _as_result(schedule, delta, leak, chosen, parts, feats.shape[1], representation)


def _as_result(
    schedule: Schedule,
    delta: float,
    leak: dict[str, float],
    chosen: float,
    parts: dict[str, Any],
    dim: int,
    representation: str,
) -> BoundResult:
    per_dim = parts["total"] / dim
    frac = parts["total"] / parts["prior_variance"] if parts["prior_variance"] > 0 else float("nan")
    components: dict[str, Any] = {
        **leak,
        "leakage_used": chosen,
        "epsilon": dpsgd_epsilon(schedule, delta),
        "delta": delta,
        "total_distortion": parts["total"],
        "dimension": dim,
        "frac_prior_variance": frac,
        "psnr_ceiling": 10.0 * math.log10(1.0 / per_dim) if per_dim > 0 else math.inf,
        **{k: v for k, v in parts.items() if k != "total"},
    }
    return BoundResult(
        value=per_dim,
        unit=f"mean squared error per {'pixel' if representation == 'pixel' else 'feature'}",
        kind="lower",
        components=components,
        assumptions=(
            "informed adversary (knows D_-, every noisy update, the other records' sampling); "
            "target independent of D_-; sampling-based terms hold with the stated confidence "
            "for i.i.d. samples, or exactly when the prior is uniform over the sample"
        ),
    )
