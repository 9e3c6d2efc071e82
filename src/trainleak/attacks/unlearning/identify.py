"""Identify a ridge server's hidden statistics from broadcasts, and invert a deletion.

After a known cumulative change ``(dA_k, dB_k)`` of the hidden state ``(A, B)`` the server
broadcasts ``W_k`` with ``(A + dA_k) W_k = B + dB_k``. Differencing against the first
observation removes ``B`` and leaves a linear system in the symmetric unknown ``A``:

    A D = R,   D = [W_k - W_0]_k,   R = [dB_k - dB_0 - dA_k W_k + dA_0 W_0]_k.

``A`` is identified exactly iff ``rank(D) = d`` (a symmetric ``S != 0`` with ``S D = 0`` exists
iff the columns of ``D`` miss a direction, so symmetry does not help). :func:`solve_symmetric`
solves it through the SVD of ``D``; when the rank is deficient the unidentified block is filled
from the prior ``A ~ lam I`` (the ridge regulariser is public) [inferred].

A single deletion of ``(phi, y)`` then leaves a rank-one footprint
``M = A_t W_{t+1} - B_t = phi (phi^T W_{t+1} - y^T)``, from which :func:`recover_deletion`
reads the direction of ``phi`` (top singular vector), its scale, and the label as the class
that breaks the otherwise exact proportionality.

References:
    Seed system 6 (trainleak's seed briefs, section 6); the algebra is standard linear
    identification [inferred], cf. Quan, Wu, Montana, arXiv 2603.12977 for the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainleak.errors import ShapeError


@dataclass(frozen=True)
class StateEstimate:
    """An estimate of the hidden server state at the reference observation.

    Attributes:
        A: estimated Gram matrix (symmetric, d x d).
        B: estimated feature-label sums (d x c).
        rank: numerical rank of the response matrix ``D`` (``d`` means identifiable).
        cond: condition number of ``D`` restricted to its numerical rank.
        residual: relative residual ``||A D - R|| / ||R||`` of the fit.
    """

    A: np.ndarray
    B: np.ndarray
    rank: int
    cond: float
    residual: float

    @property
    def identified(self) -> bool:
        """Whether the rank condition ``rank(D) = d`` holds."""
        return self.rank == self.A.shape[0]


def rounding_unit(heads: Sequence[np.ndarray], precision: str) -> float:
    """An upper estimate of the per-entry error with which ``heads`` were published.

    Args:
        heads: the published heads.
        precision: their broadcast precision.

    Returns:
        The error of one entry (float64 solver error for ``"float64"``).
    """
    scale = max(float(np.abs(h).max()) for h in heads) if heads else 1.0
    if precision.startswith("decimals:"):
        return 0.5 * 10.0 ** -int(precision.split(":")[1])
    eps = {"float64": 1e-13, "float32": 2.0**-24, "float16": 2.0**-11}.get(precision, 1e-13)
    return eps * max(scale, 1e-300)


def probe_identifiability(D: np.ndarray, noise: float = 0.0) -> tuple[int, float, np.ndarray]:
    """The rank condition: numerical rank of the response matrix ``D`` (d x n).

    Args:
        D: stacked head differences ``[W_k - W_0]``.
        noise: per-entry error of ``D``; singular values below the noise floor
            ``2 noise (sqrt(d) + sqrt(n))`` (and below ``1e-10 sigma_max``) do not count.

    Returns:
        ``(rank, cond, singular_values)``; identification is exact iff ``rank == d``.
    """
    if D.size == 0:
        return 0, float("inf"), np.zeros(0)
    s = np.linalg.svd(D, compute_uv=False)
    floor = _noise_floor(D, noise, s)
    rank = int((s > floor).sum())
    cond = float(s[0] / s[rank - 1]) if rank else float("inf")
    return rank, cond, s


def solve_symmetric(
    D: np.ndarray, R: np.ndarray, *, noise: float = 0.0, prior_lam: float = 0.0
) -> tuple[np.ndarray, int, float, float]:
    """Solve ``A D = R`` for a symmetric positive definite ``A``, via ``H = A^{-1}``.

    ``A D = R`` is ``H R = D``: the equations fix the action of ``H`` on ``span(R)``, which
    for own-data probes is the span of the client's own records. With ``R = U S V^T``
    truncated at the numerical rank ``r`` of ``D``, ``H U_r = K := D V_r S_r^{-1}``; in the
    basis ``[U_r, U_perp]`` that gives ``H_11 = U_r^T K`` (symmetrised) and ``H_21 =
    U_perp^T K``, and only ``H_22`` is unidentified. It is set to ``I / prior_lam``, exact
    when no record has mass in those directions (then ``A = lam I`` there) [inferred]; with
    ``prior_lam = 0`` it is left zero and ``A`` is the pseudo-inverse. With ``r = d`` the prior
    plays no role and the SVD route avoids squaring the condition number of ``D``.

    Args:
        D: response matrix (d x n).
        R: right-hand sides (d x n).
        noise: per-entry error of ``D`` (sets the numerical rank).
        prior_lam: the public ridge regulariser, the prior for unreached directions.

    Returns:
        ``(A, rank, cond, relative residual)``.
    """
    d = D.shape[0]
    rank, cond, _ = probe_identifiability(D, noise)
    U, s, Vt = np.linalg.svd(R, full_matrices=True)
    Ur, Up = U[:, :rank], U[:, rank:]
    K = D @ Vt[:rank].T / np.maximum(s[:rank], 1e-300)
    H11, H21 = Ur.T @ K, Up.T @ K
    fill = (1.0 / prior_lam if prior_lam > 0 else 0.0) * np.eye(d - rank)
    H = U @ np.block([[0.5 * (H11 + H11.T), H21.T], [H21, fill]]) @ U.T
    H = 0.5 * (H + H.T)
    A = np.linalg.inv(H) if prior_lam > 0 or rank == d else np.linalg.pinv(H, hermitian=True)
    A = 0.5 * (A + A.T)
    res = float(np.linalg.norm(A @ D - R) / max(float(np.linalg.norm(R)), 1e-300))
    return A, rank, cond, res


def _noise_floor(D: np.ndarray, noise: float, s: np.ndarray) -> float:
    top = float(s[0]) if s.size else 0.0
    return max(2 * noise * (np.sqrt(D.shape[0]) + np.sqrt(D.shape[1])), 1e-10 * top, 1e-300)


def identify_state(
    heads: Sequence[np.ndarray],
    dAs: Sequence[np.ndarray],
    dBs: Sequence[np.ndarray],
    *,
    noise: float = 0.0,
    prior_lam: float = 0.0,
) -> StateEstimate:
    """Estimate ``(A, B)`` from heads observed under known cumulative changes.

    Args:
        heads: ``W_k`` (d x c) for ``k = 0..K``, observed at state ``(A + dA_k, B + dB_k)``.
        dAs: the known cumulative Gram changes ``dA_k`` (d x d); usually ``dA_0 = 0``.
        dBs: the known cumulative label-sum changes ``dB_k`` (d x c).
        noise: per-entry error of the heads (see :func:`rounding_unit`).
        prior_lam: the prior ``A ~ prior_lam I`` used only in unidentified directions.

    Returns:
        A :class:`StateEstimate` of the unchanged state ``(A, B)``.

    Raises:
        ShapeError: fewer than two observations or inconsistent shapes.

    Example:
        >>> import numpy as np
        >>> A = np.array([[2.0, 0.5], [0.5, 1.0]]); B = np.eye(2)
        >>> dB = [np.zeros((2, 2)), np.eye(2)]
        >>> heads = [np.linalg.solve(A, B + b) for b in dB]
        >>> est = identify_state(heads, [np.zeros((2, 2))] * 2, dB)
        >>> bool(np.allclose(est.A, A)), est.rank
        (True, 2)
    """
    if len(heads) < 2 or not len(heads) == len(dAs) == len(dBs):
        raise ShapeError(
            f"identify_state needs K >= 2 observations with one (dA, dB) each; received "
            f"{len(heads)} heads, {len(dAs)} dA, {len(dBs)} dB"
        )
    W0 = heads[0]
    D = np.concatenate([W - W0 for W in heads[1:]], axis=1)
    R = np.concatenate(
        [dB - dBs[0] - dA @ W + dAs[0] @ W0 for W, dA, dB in zip(heads[1:], dAs[1:], dBs[1:])],
        axis=1,
    )
    A, rank, cond, res = solve_symmetric(D, R, noise=noise, prior_lam=prior_lam)
    B = np.mean([(A + dA) @ W - dB for W, dA, dB in zip(heads, dAs, dBs)], axis=0)
    return StateEstimate(A, B, rank, cond, res)


@dataclass(frozen=True)
class RecoveredDeletion:
    """What :func:`recover_deletion` reads from one isolated single-record deletion.

    Attributes:
        phi: the deleted record's features (d,).
        label: its label.
        rank_one_ratio: ``sigma_2 / sigma_1`` of the footprint ``M`` (0 for an exact single
            deletion; large values mean the deletion was not a single record or the state
            estimate is off).
        label_margin: residual of the runner-up label over the chosen one (confidence).
    """

    phi: np.ndarray
    label: int
    rank_one_ratio: float
    label_margin: float


def recover_deletion(A: np.ndarray, B: np.ndarray, W_after: np.ndarray) -> RecoveredDeletion:
    """Invert one isolated deletion from the state before it and the head broadcast after it.

    Args:
        A: Gram matrix before the deletion (d x d).
        B: feature-label sums before the deletion (d x c).
        W_after: the head broadcast right after the deletion (d x c).

    Returns:
        The deleted record's features and label, with two diagnostics.
    """
    M = A @ W_after - B
    U, s, _ = np.linalg.svd(M, full_matrices=False)
    u = U[:, 0]
    g, r = W_after.T @ u, M.T @ u  # r = alpha^2 g - alpha y
    c = g.shape[0]
    residuals, scales, offsets = np.empty(c), np.empty(c), np.empty(c)
    for label in range(c):
        keep = np.arange(c) != label
        a = float(r[keep] @ g[keep] / max(g[keep] @ g[keep], 1e-300))
        residuals[label] = float(((r[keep] - a * g[keep]) ** 2).sum())
        scales[label], offsets[label] = a, a * g[label] - r[label]
    order = np.argsort(residuals)
    best = int(order[0])
    a, b = scales[best], offsets[best]
    alpha = np.sign(b) * np.sqrt(a) if a > 0 else b
    ratio = float(s[1] / s[0]) if s.size > 1 and s[0] > 0 else 0.0
    margin = float(residuals[order[1]] - residuals[best]) if c > 1 else 0.0
    return RecoveredDeletion(alpha * u, best, ratio, margin)


@dataclass(frozen=True)
class DeletedSummary:
    """The statistics removed between two identified states (a client or class summary).

    Attributes:
        dA: removed Gram ``sum phi phi^T`` of the deleted records (d x d).
        dB: removed label sums; column ``j`` is the sum of the deleted class-``j`` features.
        rank: numerical rank of ``dA`` (the number of independent deleted records).
        phis: the deleted features when ``rank == 1`` (``sqrt(eig) * eigvec``), else top
            eigen-directions scaled by the root eigenvalues.
    """

    dA: np.ndarray  # noqa: N815
    dB: np.ndarray  # noqa: N815
    rank: int
    phis: np.ndarray


def recover_summary(
    before: StateEstimate, after: StateEstimate, rtol: float = 1e-6
) -> DeletedSummary:
    """The summary of whatever was deleted between two identified states.

    Args:
        before: the state identified before the deletion.
        after: the state identified after it (with fresh probes).
        rtol: relative eigenvalue threshold for the rank.

    Returns:
        A :class:`DeletedSummary`.
    """
    dA = before.A - after.A
    dA = 0.5 * (dA + dA.T)
    dB = before.B - after.B
    evals, evecs = np.linalg.eigh(dA)
    keep = evals > rtol * max(float(np.abs(evals).max()), 1e-300)
    phis = (evecs[:, keep] * np.sqrt(evals[keep])).T[::-1]
    if phis.shape[0] == 1:  # fix the sign so that the label column of dB is positive
        phis = phis * np.sign(float(phis[0] @ dB.sum(1)) or 1.0)
    return DeletedSummary(dA, dB, int(keep.sum()), phis)
