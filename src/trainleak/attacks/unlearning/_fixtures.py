"""Tiny unlearning releases for the conformance suite, tests and doc examples."""

from __future__ import annotations

import numpy as np
import torch

from trainleak.releases.base import Knowledge
from trainleak.releases.unlearning import BroadcastLog, DeletionTranscript
from trainleak.scenarios.probing_client import ProbingClient
from trainleak.systems.unlearning.retraining import RandomizedResponse, UnlearningMechanism
from trainleak.systems.unlearning.server import ExactUnlearningServer


def tiny_broadcast_log(
    seed: int = 0, dim: int = 6, n_classes: int = 3, deletions: int = 2, precision: str = "float64"
) -> tuple[BroadcastLog, list[tuple[np.ndarray, int]]]:
    """A server with 20 honest records; unrestricted probes, then single honest deletions.

    Returns:
        The attacker's log and the ground truth ``(phi, label)`` of each deletion, in order.
    """
    rng = np.random.default_rng(seed)
    server = ExactUnlearningServer(dim=dim, n_classes=n_classes, lam=1.0, precision=precision)
    ids = server.add(
        "honest",
        torch.from_numpy(rng.random((20, dim))),
        torch.from_numpy(rng.integers(0, n_classes, 20)),
    )
    client = ProbingClient("mallory", "unrestricted", seed=seed)
    truth = []
    for i in ids[:deletions]:
        client.probe(server)
        truth.append(server.record(i))
        server.delete("honest", [i])
    return server.log_for("mallory"), truth


def tiny_transcript(
    seed: int = 0, n: int = 50, k: int = 5, eps: float = 1.0
) -> tuple[DeletionTranscript, np.ndarray]:
    """Randomized response on ``n`` honest bits plus ``k`` adversarial records, all deleted.

    Returns:
        The transcript (fresh coins) and the honest bits.
    """
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, n)
    mech = UnlearningMechanism(RandomizedResponse(eps), "fresh", seed=seed)
    adv = np.arange(n, n + k)
    mech.fit(np.arange(n + k), np.concatenate([bits, np.zeros(k, dtype=np.int64)]))
    for a in adv:
        mech.delete([int(a)])
    return mech.transcript(adv), bits


def empty_knowledge() -> Knowledge:
    """These attacks need nothing beyond the release."""
    return Knowledge()
