"""Measure what deletions under perfect retraining leak about the undeleted (seed system 16)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from trainleak.attacks.unlearning.retraining import RetrainingReconstructionAttack
from trainleak.errors import ConfigError
from trainleak.releases.unlearning import DeletionTranscript
from trainleak.systems.unlearning.retraining import (
    RandomizedResponse,
    Randomness,
    UnlearningMechanism,
)


def rr_transcript_rates(
    bits: np.ndarray,
    eps: float,
    randomness: Randomness,
    deletions: list[int],
    *,
    seed: int = 0,
    adversary_first: bool = False,
) -> list[float]:
    """Fraction of honest bits majority vote recovers after each number of deletions.

    The adversary inserts ``max(deletions)`` records (before or after the honest ones in data-set
    order) and deletes them one at a time; the attack uses the first ``k + 1`` releases.
    """
    transcript = _insert_and_delete(bits, eps, randomness, max(deletions), seed, adversary_first)
    rates = []
    for k in deletions:
        rec = RetrainingReconstructionAttack(max_releases=k + 1)(transcript, seed=seed)
        order = np.asarray(rec.diagnostics["record_ids"])
        rates.append(float((rec.inputs[:, 0].numpy() == bits[order]).mean()))
    return rates


def distinguishing_advantage(
    randomness: Randomness,
    eps: float,
    deletions: int,
    *,
    trials: int = 400,
    n_honest: int = 8,
    seed: int = 0,
    adversary_first: bool = False,
) -> float:
    """Estimate the adversary's advantage on neighbouring undeleted data sets.

    ``D0`` and ``D1`` differ only in the undeleted honest record 0 (bit 0 vs 1). The adversary
    inserts ``deletions`` records, deletes them all, and guesses the bit by majority vote over
    record 0's releases. Returns ``P[guess = 1 | D1] - P[guess = 1 | D0]`` over ``trials`` runs
    each. A view simulatable from one eps-DP run keeps this at most ``tanh(eps / 2)``.
    """
    if trials < 1 or deletions < 0:
        raise ConfigError.invalid(
            "trials, deletions", "trials >= 1 and deletions >= 0", (trials, deletions)
        )
    rng = np.random.default_rng(seed)
    guesses = np.zeros((2, trials))
    for b in (0, 1):
        for t in range(trials):
            bits = rng.integers(0, 2, n_honest)
            bits[0] = b
            rates_seed = int(rng.integers(2**31))
            guesses[b, t] = _guess_first(
                bits, eps, randomness, deletions, rates_seed, adversary_first
            )
    return float(guesses[1].mean() - guesses[0].mean())


def _insert_and_delete(
    bits: np.ndarray, eps: float, randomness: Randomness, k: int, seed: int, first: bool
) -> DeletionTranscript:
    """Honest ``bits`` plus ``k`` adversary records (first or last in data-set order), run
    through randomized response under perfect retraining; the adversary then deletes its
    records one at a time. Returns the transcript the adversary observes."""
    n = len(bits)
    adv = np.arange(n, n + k)
    ids = np.concatenate([adv, np.arange(n)]) if first else np.arange(n + k)
    zeros = np.zeros(k, dtype=np.int64)
    vals = np.concatenate([zeros, bits]) if first else np.concatenate([bits, zeros])
    mech = UnlearningMechanism(RandomizedResponse(eps), randomness, seed=seed)
    mech.fit(ids, vals)
    for a in adv:
        mech.delete([int(a)])
    return mech.transcript(adv)


def _guess_first(
    bits: np.ndarray, eps: float, randomness: Randomness, k: int, seed: int, first: bool
) -> float:
    transcript = _insert_and_delete(bits, eps, randomness, k, seed, first)
    rec = RetrainingReconstructionAttack()(transcript, seed=seed % 1000)
    pos = list(rec.diagnostics["record_ids"]).index(0)
    return float(rec.inputs[pos, 0])


Placement = Literal["last", "first"]
