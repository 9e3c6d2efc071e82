"""Published reconstruction bounds for DP-SGD, at the same (q, sigma, T) as trainleak's own.

* Guo, Karrer, Chaudhuri & van der Maaten, *Bounding Training Data Reconstruction in Private
  (Deep) Learning*, ICML 2022, arXiv 2201.12383: for an **unbiased** estimator,
  E||x_hat - x||^2 / d >= sum_i diam_i^2 / (4 d (exp(eps_2) - 1)), eps_2 the Renyi-DP epsilon at
  order 2 (with hard clipping, T log(1 + q^2 (exp(1/sigma^2) - 1))). It says nothing about
  biased estimators such as a posterior mean, which can and do beat it; values above the
  prior variance only mean that no unbiased estimator beats a constant guess.
* Hayes, Mahloujifar & Balle, *Bounding Training Data Reconstruction in DP-SGD*, NeurIPS 2023,
  arXiv 2302.07225: reconstruction robustness, an upper bound on the success probability of
  any attack when the target is one of N equally likely candidates,
  gamma(kappa) = sup{nu(E) : mu(E) <= kappa}, kappa = 1/N, mu the adversary's view without the
  target and nu with a worst-case clipped gradient. By Neyman-Pearson the optimal E is a
  likelihood-ratio set; gamma is estimated here by Monte Carlo from a local generator, with
  its standard error reported. [inferred] For a prior uniform over a finite pool it is turned
  into an MSE bound: P(||Z_hat - Z|| < r) <= gamma(kappa(r)) with kappa(r) the largest pool mass
  within 2r of a pool point, so E||Z_hat - Z||^2 >= integral_0^inf (1 - gamma(kappa(sqrt s))) ds.
"""

from __future__ import annotations

import math

import numpy as np

from trainleak.bounds.base import BoundResult
from trainleak.bounds.dpsgd import Schedule, renyi2_epsilon
from trainleak.errors import ConfigError
from trainleak.validation import check_positive


def guo_unbiased_bound(schedule: Schedule, diameter: float = 1.0) -> BoundResult:
    """Guo et al. (2022) per-coordinate MSE bound for unbiased estimators.

    Args:
        schedule: the DP-SGD schedule.
        diameter: per-coordinate diameter of the data domain (1 for [0, 1]).

    Returns:
        A lower :class:`BoundResult` (valid for unbiased estimators only).

    Example:
        >>> round(guo_unbiased_bound(Schedule.constant(0.01, 0.5, 100)).value, 3)
        0.354
    """
    check_positive("diameter", diameter)
    eps2 = renyi2_epsilon(schedule)
    value = diameter**2 / (4.0 * math.expm1(eps2))
    return BoundResult(
        value=value,
        unit="mean squared error per coordinate",
        components={"renyi_epsilon_order2": eps2, "diameter": diameter},
        assumptions="unbiased estimators only (Guo et al. 2022, Thm. 1 with RDP at order 2)",
    )


def _privacy_losses(
    schedule: Schedule, present: bool, n: int, rng: np.random.Generator, chunk: int = 4096
) -> np.ndarray:
    """Samples of the T-step privacy loss under mu (absent) or nu (present)."""
    out = np.zeros(n)
    for q, sigma, steps in zip(schedule.sampling_rates, schedule.noise_multipliers, schedule.steps):
        a = 1.0 / sigma
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            x = rng.standard_normal((m, steps))
            if present:
                x += a * (rng.random((m, steps)) < q)
            out[start : start + m] += np.log1p(q * np.expm1(a * x - 0.5 * a * a)).sum(1)
    return out


class HayesRero:
    """Monte Carlo estimate of the Hayes et al. (2023) success bound gamma(kappa).

    Args:
        schedule: the DP-SGD schedule.
        samples: Monte Carlo samples per distribution.
        seed: seed of the local generator.
    """

    def __init__(self, schedule: Schedule, samples: int = 100_000, seed: int = 0) -> None:
        if samples < 1000:
            raise ConfigError.invalid("samples", "at least 1000 Monte Carlo samples", samples)
        rng = np.random.default_rng(seed)
        self.absent = np.sort(_privacy_losses(schedule, False, samples, rng))
        self.present = np.sort(_privacy_losses(schedule, True, samples, rng))

    def success(self, kappa: float | np.ndarray) -> np.ndarray:
        """gamma(kappa) and its Monte Carlo standard error, stacked as ``(2, len(kappa))``."""
        k = np.clip(np.atleast_1d(np.asarray(kappa, dtype=float)), 0.0, 1.0)
        n = self.absent.size
        tau = np.quantile(self.absent, 1.0 - k)
        frac = 1.0 - np.searchsorted(self.present, tau, side="right") / n
        gamma = np.maximum(frac, k)
        se = np.sqrt(gamma * (1.0 - gamma) / n)
        return np.stack([np.minimum(gamma, 1.0), se])


def hayes_success_bound(
    schedule: Schedule, n_candidates: int, samples: int = 100_000
) -> BoundResult:
    """Upper bound on the probability of reconstructing one of ``n_candidates`` uniform ones.

    Example:
        >>> r = hayes_success_bound(Schedule.constant(0.01, 1.0, 100), 10, samples=20_000)
        >>> abs(r.value - 0.127) < 0.02
        True
    """
    if n_candidates < 1:
        raise ConfigError.invalid("n_candidates", "an integer >= 1", n_candidates)
    g = HayesRero(schedule, samples).success(1.0 / n_candidates)
    return BoundResult(
        value=float(g[0, 0]),
        unit="success probability",
        kind="upper",
        components={"monte_carlo_se": float(g[1, 0]), "chance": 1.0 / n_candidates},
        assumptions="informed adversary, worst-case clipped gradient, uniform prior over N",
    )


def hayes_mse_bound(
    schedule: Schedule, distances_sq: np.ndarray, samples: int = 100_000, se_margin: float = 3.0
) -> BoundResult:
    """MSE lower bound for a target uniform over a finite pool, from the ReRo bound.

    Args:
        schedule: the DP-SGD schedule.
        distances_sq: ``(N, N)`` squared distances between the pool's records.
        samples: Monte Carlo samples.
        se_margin: gamma is raised by this many standard errors before use.

    Returns:
        A lower :class:`BoundResult` on E||Z_hat - Z||^2 (summed over coordinates).
    """
    n = distances_sq.shape[0]
    pos = distances_sq[distances_sq > 0]
    if pos.size == 0:
        raise ConfigError.invalid("distances_sq", "a pool with two distinct records", n)
    rero = HayesRero(schedule, samples)
    # the integrand 1 - gamma(kappa(sqrt s)) does not increase in s, so the right-endpoint
    # Riemann sum over any grid is a lower bound on the integral
    grid = np.concatenate([[0.0], np.geomspace(pos.min() / 4.0, pos.max() / 4.0, 400)])
    d_sorted = np.sort(distances_sq, axis=1)
    kappa = np.stack([np.searchsorted(row, 4.0 * grid[1:], side="right") for row in d_sorted])
    kappa = kappa.max(axis=0) / n
    g = rero.success(kappa)
    gamma = np.minimum(g[0] + se_margin * g[1], 1.0)
    value = float(((grid[1:] - grid[:-1]) * (1.0 - gamma)).sum())
    return BoundResult(
        value=value,
        unit="squared error (sum over coordinates)",
        components={"pool_size": n, "gamma_at_chance": float(rero.success(1.0 / n)[0, 0])},
        assumptions="target uniform over the pool; informed adversary (Hayes et al. 2023)",
    )


def _binary_kl(p: float, k: float) -> float:
    """kl(p || k) between Bernoulli(p) and Bernoulli(k), in nats (0 log 0 = 0)."""
    out = p * math.log(p / k) if p > 0 else 0.0
    return out + ((1 - p) * math.log((1 - p) / (1 - k)) if p < 1 else 0.0)


def leakage_success_bound(leakage: float, n_candidates: int, tol: float = 1e-12) -> BoundResult:
    """Upper bound on identifying the target among N equally likely candidates, from leakage.

    Trainleak's leakage bound L >= I(Z; view) in Hayes et al.'s units: for Z uniform over N
    candidates and any estimate Z_hat, the event {Z_hat = Z} has probability P_s under the joint
    law and exactly 1/N under the product of the marginals, so data processing for the KL
    divergence gives kl(P_s || 1/N) <= I(Z; Z_hat) <= L (the argument behind Fano's inequality;
    Cover & Thomas 2006, Sec. 2.10). The bound is the largest p with kl(p || 1/N) <= L.

    Args:
        leakage: upper bound on the information about the target, nats (>= 0).
        n_candidates: N >= 2.
        tol: bisection tolerance on p.

    Returns:
        An upper :class:`BoundResult` in success probability.

    Example:
        >>> round(leakage_success_bound(0.0, 10).value, 6)
        0.1
        >>> leakage_success_bound(math.log(10), 10).value > 0.999
        True
    """
    if leakage < 0 or not math.isfinite(leakage):
        raise ConfigError.invalid("leakage", "a finite number >= 0", leakage)
    if n_candidates < 2:
        raise ConfigError.invalid("n_candidates", "an integer >= 2", n_candidates)
    k = 1.0 / n_candidates
    lo, hi = k, 1.0
    if _binary_kl(hi, k) <= leakage:
        lo = hi
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _binary_kl(mid, k) <= leakage else (lo, mid)
    return BoundResult(
        value=hi,
        unit="success probability",
        kind="upper",
        components={"leakage": leakage, "chance": k},
        assumptions="target uniform over the N candidates; L >= I(Z; view)",
    )
