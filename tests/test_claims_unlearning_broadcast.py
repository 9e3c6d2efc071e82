"""Claims of ``unlearning-broadcast-leak`` on synthetic rows: each must hold and must fail."""

from __future__ import annotations

import dataclasses
from typing import Any

from trainleak.experiments.unlearning_broadcast import UnlearningBroadcastConfig
from trainleak.experiments.unlearning_broadcast_claims import (
    DetectionRow,
    Row,
    SettingRow,
    claim_concurrency_breaks,
    claim_detectability,
    claim_exact_float64,
    claim_fp16_labels_survive,
    claim_minimal_probes,
    claim_no_false_certificate,
    claim_one_class_fails,
    claim_precision_hurts,
)

CFG = UnlearningBroadcastConfig()


def _row(probe: str, precision: str = "float64", **kw: Any) -> SettingRow:
    exact = precision in ("float64", "float32")
    base: dict[str, Any] = dict(
        setting="digits/raw", probe=probe, precision=precision, diversity="all", concurrent=0.0,
        d=64, deletions=25, label_acc=1.0 if exact else 0.7, exact_rate=1.0 if exact else 0.0,
        cos_mean=1.0 if exact else 0.3, cos_min=1.0 if exact else 0.1, state_err=1e-12,
        rank_min=64, probes=7.0, certified=1.0 if exact else 0.0, certified_wrong=0,
        reinsert_err=1e-12,
    )  # fmt: skip
    return SettingRow(**(base | kw))


DET = DetectionRow(1.0, 0.0, 0.0)
GOOD: list[Row] = [
    *(_row(p, prec) for p in ("unrestricted", "own_data") for prec in ("float64", "float16")),
    _row("own_data", diversity="one class", rank_min=23, label_acc=0.6, cos_min=0.2),
    _row("own_data", concurrent=0.3, label_acc=0.4, cos_min=0.5),
    DET,
]


def _replace(rows: list[Row], i: int, **kw: Any) -> list[Row]:
    out = list(rows)
    out[i] = dataclasses.replace(out[i], **kw)
    return out


def _untested(c: Any) -> bool:
    return not c.holds and "not_tested" in c.evidence


def test_exact_float64_both_sides() -> None:
    assert claim_exact_float64(GOOD, CFG).holds
    assert not claim_exact_float64(_replace(GOOD, 0, cos_min=0.99), CFG).holds
    assert not claim_exact_float64(_replace(GOOD, 2, label_acc=0.96), CFG).holds
    assert _untested(claim_exact_float64([r for r in GOOD if r != GOOD[2]], CFG))  # no own_data


def test_precision_hurts_both_sides() -> None:
    assert claim_precision_hurts(GOOD, CFG).holds
    assert not claim_precision_hurts(_replace(GOOD, 1, exact_rate=0.6), CFG).holds
    assert _untested(claim_precision_hurts([GOOD[0], GOOD[2], DET], CFG))


def test_fp16_labels_survive_both_sides() -> None:
    assert claim_fp16_labels_survive(GOOD, CFG).holds
    assert not claim_fp16_labels_survive(_replace(GOOD, 3, label_acc=0.1), CFG).holds
    assert _untested(claim_fp16_labels_survive([GOOD[0], DET], CFG))


def test_one_class_fails_both_sides() -> None:
    assert claim_one_class_fails(GOOD, CFG).holds
    identified = _replace(GOOD, 4, rank_min=64, label_acc=1.0, cos_min=1.0)
    assert not claim_one_class_fails(identified, CFG).holds
    assert _untested(claim_one_class_fails(GOOD[:4], CFG))


def test_concurrency_breaks_both_sides() -> None:
    assert claim_concurrency_breaks(GOOD, CFG).holds
    assert not claim_concurrency_breaks(_replace(GOOD, 5, cos_min=0.9999), CFG).holds
    assert _untested(claim_concurrency_breaks(GOOD[:4], CFG))


def test_minimal_probes_rests_on_the_rank_not_the_plan() -> None:
    assert claim_minimal_probes(GOOD, CFG).holds
    short = claim_minimal_probes(_replace(GOOD, 0, rank_min=60), CFG)
    assert not short.holds and "not_tested" not in short.evidence
    assert _untested(claim_minimal_probes(_replace(GOOD, 0, probes=9.0), CFG))


def test_detectability_both_sides() -> None:
    assert claim_detectability([DET], CFG).holds
    assert not claim_detectability([DetectionRow(0.8, 0.0, 0.0)], CFG).holds
    assert not claim_detectability([DetectionRow(1.0, 0.5, 0.1)], CFG).holds


def test_no_false_certificate_both_sides() -> None:
    ok = claim_no_false_certificate(GOOD, CFG)
    assert ok.holds and ok.evidence["certificates"] == 2 * 25 + 2 * 25
    assert not claim_no_false_certificate(_replace(GOOD, 0, certified_wrong=1), CFG).holds
    silent = [dataclasses.replace(r, certified=0.0) for r in GOOD if isinstance(r, SettingRow)]
    assert _untested(claim_no_false_certificate(silent, CFG))
