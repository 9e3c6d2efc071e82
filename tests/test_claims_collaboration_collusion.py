"""Claims of ``collaboration-collusion`` on synthetic rows: each must hold and must fail."""

from __future__ import annotations

import dataclasses
from typing import Any

from trainleak.experiments.base import Claim, evaluate_claims
from trainleak.experiments.collaboration_collusion import CollusionConfig
from trainleak.experiments.collaboration_collusion_claims import (
    CLAIMS,
    CollusionRow,
    RefusalRow,
    Row,
    claim_anchor_noise_pivot,
    claim_anchor_noise_procrustes,
    claim_exact_recovery,
    claim_parties_keep_utility,
    claim_private_noise_costly,
    claim_rank_refusal,
)

CFG = CollusionConfig()
DS = "synthetic"


def _r(
    sigma: float = 0.0, tau: float = 0.0, acc: float = 0.86, link: float = 1.0, **kw: Any
) -> CollusionRow:
    base: dict[str, Any] = dict(
        dataset=DS, sweep="tradeoff", parties=4, sigma=sigma, tau=tau, accuracy=acc,
        inversion_linkage=link, inversion_error=1e-15 if sigma == tau == 0 else 0.5,
        procrustes_linkage=link, procrustes_error=0.1, pivot_linkage=link, pivot_error=0.1,
        targets=150,
    )  # fmt: skip
    return CollusionRow(**(base | kw))


GOOD: list[Row] = [
    _r(),
    _r(sigma=1.0, acc=0.80, link=0.9),
    _r(sigma=2.0, acc=0.67, link=0.4),
    _r(tau=1.0, acc=0.85, link=0.45),
    _r(tau=2.0, acc=0.70, link=0.01),
    *(_r(tau=1.0, acc=0.85, sweep="parties", parties=p) for p in (2, 4, 8)),
    RefusalRow(True),
]


def _untested(c: Claim) -> bool:
    return not c.holds and "not_tested" in c.evidence


def _set(rows: list[Row], i: int, **kw: Any) -> list[Row]:
    out = list(rows)
    out[i] = dataclasses.replace(out[i], **kw)
    return out


def test_exact_recovery_both_sides() -> None:
    assert claim_exact_recovery(GOOD, CFG, DS).holds
    assert not claim_exact_recovery(_set(GOOD, 0, inversion_error=1e-3), CFG, DS).holds
    assert not claim_exact_recovery(_set(GOOD, 0, inversion_linkage=0.98), CFG, DS).holds
    assert _untested(claim_exact_recovery(GOOD, CFG, "orl"))  # no ORL rows: no data


def test_private_noise_costly_both_sides() -> None:
    assert claim_private_noise_costly(GOOD, CFG, DS).holds
    cheap = _set(GOOD, 2, accuracy=0.84)  # low linkage at a 2-point drop
    assert not claim_private_noise_costly(cheap, CFG, DS).holds
    never_low = _set(GOOD, 2, procrustes_linkage=0.6)
    assert _untested(claim_private_noise_costly(never_low, CFG, DS))


def test_anchor_noise_procrustes_both_sides() -> None:
    assert claim_anchor_noise_procrustes(GOOD, CFG, DS).holds
    costly = _set(GOOD, 3, accuracy=0.80)  # tau = 1 now drops 6 points; tau = 2 drops 16
    assert not claim_anchor_noise_procrustes(costly, CFG, DS).holds
    assert _untested(claim_anchor_noise_procrustes(GOOD[:3], CFG, DS))


def test_anchor_noise_pivot_both_sides() -> None:
    assert claim_anchor_noise_pivot(GOOD, CFG, DS).holds
    pivot_survives = _set(GOOD, 3, pivot_linkage=0.8)
    assert not claim_anchor_noise_pivot(pivot_survives, CFG, DS).holds
    assert _untested(claim_anchor_noise_pivot(GOOD[:3], CFG, DS))


def test_parties_keep_utility_both_sides_in_party_order() -> None:
    assert claim_parties_keep_utility(GOOD, CFG, DS).holds
    drops = _set(GOOD, 7, accuracy=0.80)  # 8 parties: 5 points below 2 parties
    assert not claim_parties_keep_utility(drops, CFG, DS).holds
    listed_backwards = [*GOOD[:5], drops[7], drops[6], drops[5], drops[8]]
    assert not claim_parties_keep_utility(listed_backwards, CFG, DS).holds
    one_count = [r for r in GOOD if not (isinstance(r, CollusionRow) and r.parties != 4)]
    assert _untested(claim_parties_keep_utility(one_count, CFG, DS))


def test_rank_refusal_both_sides() -> None:
    assert claim_rank_refusal(GOOD, CFG).holds
    assert not claim_rank_refusal([*GOOD[:-1], RefusalRow(False)], CFG).holds
    assert _untested(claim_rank_refusal(GOOD[:-1], CFG))


def test_claims_cover_both_data_sets_and_the_refusal() -> None:
    claims = evaluate_claims(CLAIMS, GOOD, CFG)
    assert len(claims) == 11 and claims[-1].holds
    assert all(c.holds for c in claims[:5])
    assert all(_untested(c) for c in claims[5:10])  # no ORL rows
