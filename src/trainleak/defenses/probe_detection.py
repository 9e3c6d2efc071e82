"""Server-side detection of probing clients in federated unlearning (seed system 6).

A server can compare each incoming summary message with honest batches; unrestricted probes
(``dA = 0``, ``dB`` outside the span of the message's records) stand out. The statistics are
[inferred]; see :func:`detectability`.
"""

from __future__ import annotations

import numpy as np

from trainleak.errors import ShapeError
from trainleak.releases.unlearning import SummaryMessage


def detectability(
    probes: list[SummaryMessage], honest: list[SummaryMessage], *, z_threshold: float = 3.0
) -> dict[str, np.ndarray | float]:
    """Compare each probe with honest batches; return per-probe statistics and flag rates.

    Two statistics [inferred]: the z-score of ``log ||dB||_F`` against honest batches, and the
    range residual ``||(I - P) dB|| / ||dB||`` with ``P`` the projector on the span of the
    message's records (zero for any honest batch, since ``dB = Phi^T Y``; one for an
    unrestricted probe with ``dA = 0``).

    Args:
        probes: the messages to score.
        honest: honest batch messages (the reference).
        z_threshold: flag when ``|z| > z_threshold`` or the range residual exceeds ``1e-6``.

    Returns:
        ``z``, ``range_residual`` and ``flagged`` per probe, ``flag_rate`` over probes and
        ``false_flag_rate`` over the honest batches themselves.
    """
    if not honest:
        raise ShapeError("detectability needs at least one honest batch as the reference")
    ref = np.log([max(float(m.dB.norm()), 1e-300) for m in honest])
    mu, sd = float(ref.mean()), float(ref.std()) or 1.0

    def stats(msgs: list[SummaryMessage]) -> tuple[np.ndarray, np.ndarray]:
        z = (np.log([max(float(m.dB.norm()), 1e-300) for m in msgs]) - mu) / sd
        return z, np.array([_range_residual(m) for m in msgs])

    zp, rp = stats(probes)
    zh, rh = stats(honest)
    flagged = (np.abs(zp) > z_threshold) | (rp > 1e-6)
    false = (np.abs(zh) > z_threshold) | (rh > 1e-6)
    return {
        "z": zp,
        "range_residual": rp,
        "flagged": flagged,
        "flag_rate": float(flagged.mean()) if flagged.size else 0.0,
        "false_flag_rate": float(false.mean()),
    }


def _range_residual(msg: SummaryMessage) -> float:
    dB = msg.dB.numpy()
    norm = float(np.linalg.norm(dB))
    if norm == 0:
        return 0.0
    F = msg.factor.numpy()
    if F.shape[0] == 0:
        return 1.0
    Q, _ = np.linalg.qr(F.T)
    return float(np.linalg.norm(dB - Q @ (Q.T @ dB)) / norm)
