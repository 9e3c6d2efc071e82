"""Claims of ``fedsgd-batch-recovery`` on synthetic rows: each must hold and must fail."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from trainleak.experiments.base import Claim
from trainleak.experiments.fedsgd_batch_recovery import (
    FedSGDRecoveryConfig,
    RecoveryRow,
    claim_active_rates,
    claim_beats_imprint,
    claim_labels_exact,
    claim_no_false_certificate,
    claim_passive_trained,
)

CFG = FedSGDRecoveryConfig()
ER, IMP, PAS = "erasure-decoding-active", "imprint", "erasure-decoding-passive"


def _r(attack: str, b: int, rate: float, trial: int = 0, **kw: Any) -> RecoveryRow:
    steps = kw.pop("train_steps", None)
    base: dict[str, Any] = dict(
        dataset="mnist", attack=attack, model=f"honest MLP, {steps} SGD steps" if steps is not None
        else "malicious", groups=None if steps is not None else (1 if attack == IMP else 3),
        train_steps=steps, trial=trial, B=b, neurons=2 * b, exact_rate=rate,
        label_accuracy=1.0 if rate > 0 and attack != IMP else math.nan,
        certified_fraction=rate if attack != IMP else 0.0, false_certificates=0, mean_psnr=90.0,
        max_error=0.0, batch_certified=False, attack_s=0.1, client_s=0.01, time_ratio=10.0,
    )  # fmt: skip
    return RecoveryRow(**(base | kw))


ROWS = [
    _r(ER, 128, 1.0),
    _r(IMP, 128, 0.4),
    _r(ER, 512, 0.95),
    _r(IMP, 512, 0.1),
    _r(PAS, 64, 0.3, train_steps=0),
    _r(PAS, 64, 0.95, train_steps=100),
]


def _untested(c: Claim) -> bool:
    return not c.holds and "not_tested" in c.evidence


def _set(i: int, **kw: Any) -> list[RecoveryRow]:
    out = list(ROWS)
    out[i] = dataclasses.replace(out[i], **kw)
    return out


def test_active_rates_hold_for_every_batch_not_the_mean() -> None:
    assert claim_active_rates(ROWS, CFG).holds
    assert not claim_active_rates(_set(2, exact_rate=0.85), CFG).holds
    second = [*ROWS, _r(ER, 128, 1.0, trial=1), _r(ER, 512, 0.86, trial=1)]
    mixed = claim_active_rates(second, CFG)  # mean over trials 0.905 >= 0.9, one batch below
    assert not mixed.holds and mixed.evidence["mnist_B512"] == 0.86
    assert _untested(claim_active_rates(ROWS[:2], CFG))


def test_beats_imprint_pairs_the_same_batch() -> None:
    assert claim_beats_imprint(ROWS, CFG).holds
    assert not claim_beats_imprint(_set(1, exact_rate=1.0), CFG).holds  # a tie is not a win
    # imprint's other trial is poor, so a mean would hide that this batch is a tie
    paired = [*ROWS, _r(ER, 128, 0.5, trial=1), _r(IMP, 128, 0.5, trial=1)]
    assert not claim_beats_imprint(paired, CFG).holds
    assert _untested(claim_beats_imprint([_r(ER, 16, 1.0), _r(IMP, 16, 0.5)], CFG))


def test_no_false_certificate_both_sides() -> None:
    ok = claim_no_false_certificate(ROWS, CFG)
    assert ok.holds and ok.evidence["certificates"] > 0
    assert not claim_no_false_certificate(_set(0, false_certificates=2), CFG).holds
    silent = [dataclasses.replace(r, certified_fraction=0.0) for r in ROWS]
    assert _untested(claim_no_false_certificate(silent, CFG))


def test_passive_trained_both_sides_and_reads_the_step_count() -> None:
    assert claim_passive_trained(ROWS, CFG).holds
    assert not claim_passive_trained(_set(5, exact_rate=0.5), CFG).holds
    # the untrained model is excluded by its step count, whatever its label says
    relabelled = _set(4, model="honest MLP, 0 SGD steps (relabelled)", exact_rate=0.0)
    assert claim_passive_trained(relabelled, CFG).holds
    assert _untested(claim_passive_trained(ROWS[:5], CFG))


def test_labels_exact_both_sides() -> None:
    assert claim_labels_exact(ROWS, CFG).holds
    assert not claim_labels_exact(_set(0, label_accuracy=0.99), CFG).holds
    unlabelled = [dataclasses.replace(r, label_accuracy=math.nan) for r in ROWS]
    assert _untested(claim_labels_exact(unlabelled, CFG))
