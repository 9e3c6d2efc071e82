"""The risk card of ``lm-membership``: the fine-tuned language model, and the membership score
that identifies the most of its fine-tuning members at a low false-positive rate.

Rule: members identified at FPR <= 1 % (the row's ``tpr_at_1pct`` times the ``n_members``
test members). Baseline, by the same rule: chance, an exact expectation. The TPR read-out is
the best threshold whose FPR is at most ``f`` on ``N`` non-members, so at most
``j = floor(f N)`` non-members pass; a score independent of membership ranks the members
uniformly among the non-members, and the expected number of members above the ``(j + 1)``-th
non-member is ``(j + 1) M / (N + 1)``, counted up to a whole member. No bound: the target is
fine-tuned without DP.

Yin et al., arXiv 2602.19020, 2026 (ADRA); Carlini et al., IEEE S&P 2022 (TPR at low FPR).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from trainleak.experiments.lm_membership_claims import MethodRow
from trainleak.experiments.risk import (
    AttackFinding,
    RiskCard,
    riskiest_card,
    scored_finding,
    share_count,
)

FPR = 0.01


def chance_members(members: int, nonmembers: int, fpr: float = FPR) -> float:
    """Expected members a membership-blind score passes at the best threshold with FPR at most
    ``fpr`` over ``nonmembers`` non-members."""
    allowed = math.floor(fpr * nonmembers + 1e-9)
    return (allowed + 1) * members / (nonmembers + 1)


def _finding(r: MethodRow, members: int, chance: float) -> AttackFinding:
    return scored_finding(
        f"{r.method} ({r.family} membership score)",
        share_count(r.tpr_at_1pct, members),
        members,
        rule=f"members identified at FPR <= {FPR:.0%}",
        baseline=math.ceil(chance - 1e-9),
        quality=r.tpr_at_1pct,
        detail=f"AUROC {r.auroc:.3g} [{r.auroc_lo:.3g}, {r.auroc_hi:.3g}], TPR at 0.1 % FPR "
        f"{r.tpr_at_01pct:.3g}; baseline: chance, {chance:.3g} members expected",
    )


def risk_of(rows: Sequence[Any], cfg: Any) -> RiskCard:
    """The card of the fine-tuned model with its strongest membership score."""
    members, nonmembers = cfg.n_members, cfg.n_nonmembers
    chance = chance_members(members, nonmembers)
    found = [_finding(r, members, chance) for r in rows if isinstance(r, MethodRow)]
    name = (
        f"the open-weight language model fine-tuned on {members} members "
        f"(scored among {members + nonmembers} test candidates)"
    )
    return riskiest_card({name: (found, [])} if found else {})
