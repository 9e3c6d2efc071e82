"""The malicious client's side: probe plans, probing against a server, reading its log.

Two probe types (seed system 6):

- **unrestricted**: chosen summaries with ``dA = 0`` and ``dB`` a block of ``c`` orthonormal
  columns. Each adds ``c`` response directions ``A^{-1} dB``, so ``ceil(d / c)`` probes are
  necessary and sufficient for ``rank(D) = d`` (the minimal probe set).
- **own data**: batches of the client's own records, which move the head only inside
  ``span((A + dA)^{-1} Phi^T)``: at most ``min(r, c)`` new directions per batch. Low-diversity
  data (one class, near-duplicates) leaves ``rank(D) < d`` and identification fails.

References:
    Seed system 6 (trainleak's seed briefs, section 6); the probe algebra is [inferred].
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch

from trainleak.attacks.unlearning.identify import StateEstimate, rounding_unit, solve_symmetric
from trainleak.errors import ConfigError, ShapeError
from trainleak.releases.unlearning import BroadcastLog, SummaryMessage

ProbeKind = Literal["unrestricted", "own_data"]


def minimal_probe_count(
    dim: int, n_classes: int, kind: ProbeKind = "unrestricted", batch: int = 10
) -> int:
    """The lower bound ``ceil(d / min(r, c))`` on probes (``r = c`` for unrestricted probes)."""
    per = n_classes if kind == "unrestricted" else min(batch, n_classes)
    return math.ceil(dim / per)


def plan_unrestricted(dim: int, n_classes: int, *, scale: float, seed: int) -> list[SummaryMessage]:
    """The minimal unrestricted probe set: ``ceil(d/c)`` blocks of a random orthonormal basis.

    Args:
        dim: feature dimension ``d``.
        n_classes: number of classes ``c``.
        scale: Frobenius-per-column size of each ``dB`` (match honest batches to hide).
        seed: seed of the random basis.

    Returns:
        The probe messages; together their ``dB`` columns span ``R^d``.
    """
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    msgs = []
    for k in range(minimal_probe_count(dim, n_classes)):
        block = np.zeros((dim, n_classes))
        cols = basis[:, k * n_classes : (k + 1) * n_classes]
        block[:, : cols.shape[1]] = cols * scale
        msgs.append(SummaryMessage.unrestricted(torch.from_numpy(block)))
    return msgs


def plan_own_batches(labels: np.ndarray, batch: int, *, seed: int) -> list[np.ndarray]:
    """Split own records into class-interleaved batches (indices), most diverse first."""
    if batch < 1:
        raise ConfigError.invalid("batch", "an integer >= 1", batch)
    rng = np.random.default_rng(seed)
    by_class = [rng.permutation(np.flatnonzero(labels == c)).tolist() for c in np.unique(labels)]
    order: list[int] = []
    while any(by_class):
        for queue in by_class:
            if queue:
                order.append(queue.pop())
    return [np.array(order[i : i + batch]) for i in range(0, len(order), batch)]


def response_rank(D: np.ndarray) -> int:
    """Numerical rank from the eigenvalues of the small Gram ``D D^T`` (cheap)."""
    ev = np.linalg.eigvalsh(D @ D.T)
    return int((ev > 1e-18 * max(float(ev[-1]), 1e-300)).sum())


def identify_before(log: BroadcastLog, t: int, *, prior_lam: float = 0.0) -> StateEstimate:
    """Identify the state just before broadcast ``t`` from this client's own probes.

    The window starts at the previous foreign deletion (or just before the first own message)
    and uses that broadcast plus every own broadcast up to ``t - 1``; foreign additions inside
    the window are unknown to the client and simply ignored (they bias the estimate: the
    "concurrent activity" limit).

    Args:
        log: the client's broadcast log.
        t: index of the broadcast to explain (usually a foreign deletion).
        prior_lam: the public ridge regulariser, used as a prior in unidentified directions.

    Returns:
        The state estimate at broadcast ``t - 1``.

    Raises:
        ShapeError: no own message precedes ``t`` in its window.
    """
    kinds = log.kinds
    prev = [k for k in range(t) if kinds[k] == "delete"]
    owns_all = [k for k in range(t) if kinds[k] == "own"]
    start = prev[-1] if prev else (owns_all[0] - 1 if owns_all else -1)
    owns = [k for k in owns_all if k > start]
    if start < 0 or not owns:
        raise ShapeError(
            f"no own probe between broadcast {start} and broadcast {t}: nothing to identify from"
        )
    heads = log.heads.numpy()
    d, c = log.dim, log.n_classes
    dA, dB = np.zeros((d, d)), np.zeros((d, c))
    D, R = [], []
    for k in owns:
        msg = log.own[k]
        if msg is None:
            raise RuntimeError("internal invariant violated: msg is not None")
        dA, dB = dA + msg.dA().numpy(), dB + msg.dB.numpy()
        D.append(heads[k] - heads[start])
        R.append(dB - dA @ heads[k])
    noise = rounding_unit([heads[start], *(heads[k] for k in owns)], log.precision)
    A, rank, cond, res = solve_symmetric(
        np.concatenate(D, 1), np.concatenate(R, 1), noise=noise, prior_lam=prior_lam
    )
    B = A @ heads[start]
    # move the reference from `start` to `t - 1`: add the own changes made since
    return StateEstimate(A + dA, B + dB, rank, cond, res)
