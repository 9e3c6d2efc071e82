"""Source-side ingredients of the distortion bounds: blocks, entropy lower bounds, SLB and DV.

Everything here turns "the adversary learns at most L nats about the target" into "its expected
squared error on a block of coordinates is at least ...", with the source known only through a
sample. Two per-block lower bounds are provided; both are valid for every estimator, so their
maximum is too:

* **Lattice Shannon lower bound.** For data on a lattice of step Delta (8-bit pixels, the 17
  levels of scikit-learn's digits), add independent uniform dither U on the lattice cell:
  h(X + U) = H(X) + k log Delta, and any estimator of X has error D + k Delta^2 / 12 on X + U
  (U is independent and zero-mean). The Shannon lower bound (Cover & Thomas, Thm. 10.3.x;
  Berger 1971) then gives D >= k Delta^2 [exp(2 (H - L) / k) / (2 pi e) - 1 / 12]. H is
  replaced by a lower confidence bound on the discrete entropy of the block: the plug-in
  estimate is biased down (E H_n <= H, Paninski 2003) and has bounded differences 2 M_n with
  M_n = max_c |f(c) - f(c - 1)|, f(c) = -(c/n) log(c/n) (Antos & Kontoyiannis 2001), so
  McDiarmid's inequality gives H >= H_n - M_n sqrt(2 n log(1/delta)) with probability
  1 - delta.
* **Donsker-Varadhan bound per coordinate.** With P the joint law of (X, X_hat) and
  Q = P_X x P_X_hat, KL(P || Q) = I(X; X_hat) <= L, and the Donsker-Varadhan formula applied to
  f = -lambda (X - X_hat)^2 gives E (X - X_hat)^2 >= sup_lambda (-L - log M(lambda)) / lambda
  with M(lambda) = sup_a E exp(-lambda (X - a)^2). M is bounded from the sample uniformly over
  a grid of (a, lambda) by Hoeffding's inequality plus a Lipschitz term between grid points.
  At L = 0 the bound tends to the variance, where the Shannon lower bound is loose for
  near-binary data.

Blocks are disjoint groups of coordinates (pixel patches, single coordinates, or feature
channels at one location). [inferred] Orthogonal transforms (DCT, PCA) are not offered for the
rigorous bound: they map the pixel lattice off any lattice, so the dithered entropy identity
no longer holds and a plug-in entropy of quantised coefficients would not bound h from below.

References:
    Cover & Thomas, *Elements of Information Theory*, 2nd ed., 2006, Ch. 10 and 17.
    Antos & Kontoyiannis, *Convergence properties of functional estimates for discrete
    distributions*, Random Structures & Algorithms 19, 2001.
    Paninski, *Estimation of entropy and mutual information*, Neural Computation 15, 2003.
    Donsker & Varadhan, *Asymptotic evaluation of certain Markov process expectations*, 1975.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from trainleak.errors import ConfigError, ShapeError
from trainleak.validation import check_in_range

BlockKind = Literal["patches", "coordinates"]


def make_blocks(
    input_shape: tuple[int, ...], kind: BlockKind = "patches", patch: int = 2
) -> list[np.ndarray]:
    """Partition the flattened coordinates of a ``(C, H, W)`` input into disjoint blocks.

    Args:
        input_shape: ``(C, H, W)``.
        kind: ``patches`` (``patch x patch`` squares, all channels together) or
            ``coordinates`` (one block per coordinate).
        patch: side of a patch; must divide H and W.

    Returns:
        A list of index arrays into the flattened input; together they cover every coordinate
        exactly once.

    Raises:
        ConfigError: unknown kind or a patch that does not tile the image.

    Example:
        >>> [b.tolist() for b in make_blocks((1, 2, 2), "patches", 1)]
        [[0], [1], [2], [3]]
        >>> len(make_blocks((1, 8, 8), "patches", 4)), len(make_blocks((1, 8, 8))[0])
        (4, 4)
    """
    if len(input_shape) != 3:
        raise ConfigError.invalid("input_shape", "a (C, H, W) shape", input_shape)
    c, h, w = input_shape
    idx = np.arange(c * h * w).reshape(c, h, w)
    if kind == "coordinates":
        return [np.array([i]) for i in range(c * h * w)]
    if kind != "patches":
        raise ConfigError.invalid("blocks", "one of ['patches', 'coordinates']", kind)
    if patch < 1 or h % patch or w % patch:
        raise ConfigError.invalid("patch", f"a positive divisor of {h} and {w}", patch)
    return [
        idx[:, i : i + patch, j : j + patch].reshape(-1)
        for i in range(0, h, patch)
        for j in range(0, w, patch)
    ]


def lattice_step(x: np.ndarray, candidates: tuple[int, ...] = (16, 255)) -> float | None:
    """The lattice step ``1/m`` the data lie on (digits: 1/16, 8-bit: 1/255), or ``None``."""
    for m in candidates:
        scaled = x * m
        if np.abs(scaled - np.round(scaled)).max() < 1e-4:
            return 1.0 / m
    return None


def plugin_increment(n: int) -> float:
    """M_n = max_{1 <= c <= n} |f(c) - f(c-1)|, f(c) = -(c/n) log(c/n); exact."""
    c = np.arange(1, n + 1, dtype=float)
    f = -(c / n) * np.log(c / n)
    f_prev = np.concatenate([[0.0], f[:-1]])
    return float(np.abs(f - f_prev).max())


@dataclass(frozen=True)
class EntropyBound:
    """A lower confidence bound on the discrete entropy of one block.

    Attributes:
        plugin: the plug-in (maximum-likelihood) entropy of the sample, nats.
        correction: the McDiarmid deviation subtracted from it.
        lower: ``plugin - correction`` (holds with the stated confidence).
    """

    plugin: float
    correction: float
    lower: float


def entropy_lower_bound(codes: np.ndarray, delta: float) -> EntropyBound:
    """Lower confidence bound on H(X) from i.i.d. samples of a discrete vector X.

    Args:
        codes: ``(n, k)`` integer (or exactly representable) codes of n samples.
        delta: failure probability in (0, 1).

    Returns:
        H >= plug-in - M_n sqrt(2 n log(1/delta)) with probability >= 1 - delta.

    Raises:
        ConfigError: delta outside (0, 1), or fewer than 2 samples.
    """
    check_in_range("delta", delta, 0.0, 1.0, closed="()")
    n = int(codes.shape[0])
    if n < 2:
        raise ConfigError.invalid("samples", "at least 2 samples", n)
    _, counts = np.unique(codes.reshape(n, -1), axis=0, return_counts=True)
    p = counts / n
    plugin = float(-(p * np.log(p)).sum())
    correction = plugin_increment(n) * math.sqrt(2.0 * n * math.log(1.0 / delta))
    return EntropyBound(plugin, correction, plugin - correction)


def lattice_slb(entropy: float, k: int, step: float, leakage: float) -> float:
    """Shannon lower bound on E||X_b - X_hat_b||^2 for a lattice block (dithered form).

    Args:
        entropy: lower bound on the discrete entropy H(X_b), nats.
        k: block dimension.
        step: lattice step Delta.
        leakage: upper bound on I(X_b; X_hat_b), nats.

    Returns:
        max(0, k Delta^2 [exp(2 (H - L) / k) / (2 pi e) - 1/12]).
    """
    power = math.exp(2.0 * (entropy - leakage) / k) / (2.0 * math.pi * math.e)
    return max(0.0, k * step * step * (power - 1.0 / 12.0))


@dataclass(frozen=True)
class DVTable:
    """Upper confidence bounds on M_j(lambda) = sup_a E exp(-lambda (X_j - a)^2).

    Attributes:
        lambdas: the lambda grid, shape ``(G_l,)``.
        log_m: ``log`` of the bound on M for each coordinate and lambda, ``(J, G_l)``.
        variance: the sample variance of each coordinate (for reporting), ``(J,)``.
    """

    lambdas: np.ndarray
    log_m: np.ndarray
    variance: np.ndarray

    def bound(self, leakage: float) -> np.ndarray:
        """Per-coordinate lower bounds on E (X_j - X_hat_j)^2 at leakage ``leakage``."""
        vals = (-leakage - self.log_m) / self.lambdas[None, :]
        return np.maximum(vals.max(axis=1), 0.0)


def dv_table(
    samples: np.ndarray,
    value_range: tuple[float, float],
    delta: float,
    *,
    n_lambdas: int = 40,
    n_grid: int = 257,
    exact: bool = False,
) -> DVTable:
    """Bound M_j(lambda) for every coordinate j of ``samples`` (Donsker-Varadhan bound).

    Args:
        samples: ``(n, J)`` i.i.d. samples, values inside ``value_range``.
        value_range: the box the coordinates (and, after clipping, any estimate) live in.
        delta: failure probability shared by all coordinates and grid points.
        n_lambdas: size of the lambda grid (geometric, scaled to the range).
        n_grid: points of the grid over a.
        exact: the prior *is* the uniform distribution over ``samples`` (no sampling error,
            only the grid term).

    Returns:
        A :class:`DVTable`.

    Raises:
        ShapeError: samples not 2-D or outside ``value_range``.
    """
    if samples.ndim != 2:
        raise ShapeError(f"samples must be (n, J), received {samples.shape}")
    lo, hi = value_range
    if samples.min() < lo - 1e-9 or samples.max() > hi + 1e-9:
        raise ShapeError(f"samples leave value_range {value_range}")
    n, J = samples.shape
    width = hi - lo
    lambdas = np.geomspace(0.5, 4000.0, n_lambdas) / width**2
    grid = np.linspace(lo, hi, n_grid)
    spacing = grid[1] - grid[0]
    dev = 0.0 if exact else math.sqrt(math.log(J * n_grid * n_lambdas / delta) / (2.0 * n))
    lipschitz = np.sqrt(2.0 * lambdas / math.e) * spacing / 2.0
    log_m = np.empty((J, n_lambdas))
    for j in range(J):
        vals, counts = np.unique(samples[:, j], return_counts=True)
        w = counts / n
        sq = (vals[:, None] - grid[None, :]) ** 2  # (V, G)
        m = np.einsum("v,vgl->gl", w, np.exp(-sq[:, :, None] * lambdas[None, None, :]))
        log_m[j] = np.log(np.minimum(m.max(axis=0) + dev + lipschitz, 1.0))
    return DVTable(lambdas, log_m, samples.var(axis=0))


def finite_prior_bound(distances_sq: np.ndarray, leakage: float, n_lambdas: int = 200) -> float:
    """Lower bound on E||Z - Z_hat||^2 when Z is uniform over a finite pool (vector DV bound).

    For any a, with j the pool point nearest to a, ||z_i - a|| >= ||z_i - z_j|| / 2, so
    M(lambda) = sup_a E exp(-lambda ||Z - a||^2) <= max_j mean_i exp(-lambda D_ij^2 / 4), and
    E||Z - Z_hat||^2 >= sup_lambda (-L - log M(lambda)) / lambda. Valid for every estimator
    when the prior is exactly uniform over the pool (the Hayes et al. 2023 setting).

    Args:
        distances_sq: ``(N, N)`` squared distances between pool points.
        leakage: upper bound on I(Z; release), nats.
        n_lambdas: size of the lambda grid.

    Returns:
        The bound (>= 0), in the units of ``distances_sq``.
    """
    pos = distances_sq[distances_sq > 0]
    if pos.size == 0:
        return 0.0
    lambdas = np.geomspace(0.01 / pos.max(), 400.0 / pos.min(), n_lambdas)
    best = 0.0
    for lam in lambdas:
        m = np.exp(-lam * distances_sq / 4.0).mean(axis=1).max()
        best = max(best, float((-leakage - math.log(m)) / lam))
    return best


def pool_distances_sq(x: np.ndarray) -> np.ndarray:
    """Pairwise squared Euclidean distances of the rows of ``x`` (float64, clipped at 0)."""
    x = x.astype(np.float64)
    sq = (x * x).sum(1)
    return np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0)


def min_samples(n_coordinates: int, delta: float, n_grid: int = 257, n_lambdas: int = 40) -> int:
    """Fewest samples for which the DV confidence term is below 0.5 (else the bound is void)."""
    return math.ceil(2.0 * math.log(n_coordinates * n_grid * n_lambdas / delta))


def block_distortion_bound(
    x: np.ndarray,
    leakage: float,
    blocks: list[np.ndarray],
    *,
    delta: float,
    value_range: tuple[float, float],
    exact_prior: bool,
    weights: np.ndarray | None = None,
) -> dict[str, Any]:
    """Lower bound on E||X - X_hat||^2 (summed over coordinates) from a sample ``x`` (n, d).

    Per block, the larger of the lattice Shannon lower bound (when the data lie on a lattice)
    and the sum of per-coordinate Donsker-Varadhan bounds; half of ``delta`` goes to each
    family, split evenly by a union bound.

    Args:
        x: ``(n, d)`` samples inside ``value_range``.
        leakage: upper bound on the information about the target, nats.
        blocks: disjoint index arrays covering the d coordinates.
        delta: failure probability of all sample-based terms together.
        value_range: the box the coordinates live in.
        exact_prior: the prior is uniform over the rows of ``x`` (no sampling error).
        weights: per-coordinate weights of the distortion (feature scales squared); the
            distortion is sum_j w_j (X_j - X_hat_j)^2. Default 1.

    Returns:
        ``total`` and every component.

    Raises:
        ConfigError: fewer samples than the confidence level allows.
    """
    n, d = x.shape
    need = min_samples(d, delta / 2.0)
    if not exact_prior and n < need:
        raise ConfigError.invalid(
            "samples", f"at least {need} samples for confidence 1 - {delta} with {d} coordinates", n
        )
    w = np.ones(d) if weights is None else weights
    # continuous features have n distinct values per coordinate: a coarser (a, lambda) grid
    grid = (257, 40) if weights is None else (129, 24)
    table = dv_table(
        x, value_range, delta / 2.0, exact=exact_prior, n_grid=grid[0], n_lambdas=grid[1]
    )
    dv = table.bound(leakage) * w
    step = lattice_step(x) if weights is None else None
    slb = np.zeros(len(blocks))
    ent_lower = np.full(len(blocks), np.nan)
    ent_plugin = np.full(len(blocks), np.nan)
    if step is not None:
        for b, idx in enumerate(blocks):
            codes = np.round(x[:, idx] / step).astype(np.int64)
            eb = entropy_lower_bound(codes, delta / (2.0 * len(blocks)))
            ent_plugin[b] = eb.plugin
            ent_lower[b] = eb.plugin if exact_prior else eb.lower
            slb[b] = lattice_slb(ent_lower[b], len(idx), step, leakage)
    dv_blocks = np.array([dv[idx].sum() for idx in blocks])
    per_block = np.maximum(slb, dv_blocks)
    return {
        "total": float(per_block.sum()),
        "slb_total": float(slb.sum()),
        "dv_total": float(dv_blocks.sum()),
        "blocks_won_by_slb": int((slb > dv_blocks).sum()),
        "n_blocks": len(blocks),
        "block_entropy_plugin_mean": float(np.nanmean(ent_plugin)) if step else float("nan"),
        "block_entropy_lower_mean": float(np.nanmean(ent_lower)) if step else float("nan"),
        "lattice_step": step,
        "prior_variance": float((x.var(axis=0) * w).sum()),
    }


def finite_pool_bound(x: np.ndarray, leakage: float) -> float:
    """The vector DV bound for a prior uniform over the rows of ``x``."""
    return finite_prior_bound(pool_distances_sq(x), leakage)
