"""The risk card of ``split-llm-mixguard``: the defense setting whose split-learning transcript
lets an attack recover the most private slot values (names, cities, years, numbers) of the
clients' records, beyond guessing.

A slot counts as recovered when the attack's token at the slot's position is the true one. The
baseline gets the same budget (one guess a position): the better of the positional prior (the
most frequent public token at each position, measured in the run) and the exact chance
expectation ``slots / pool_size``. No bound applies: none of the defenses carries a guarantee
on reconstruction (MIXGUARD's secrets and the representation noise are not accounted as DP).

Seed 10: MIXGUARD, mixup-based obfuscation for split learning of language models.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from trainleak.experiments.risk import (
    AttackFinding,
    Release,
    RiskCard,
    riskiest_card,
    scored_finding,
    share_count,
)
from trainleak.experiments.split_llm_mixguard_claims import AttackRow


def _finding(r: AttackRow) -> AttackFinding:
    chance = share_count(r.chance, r.slots)
    positional = share_count(r.baseline_slot, r.slots)
    return scored_finding(
        r.attack,
        share_count(r.slot_recovery, r.slots),
        r.slots,
        rule="private slot tokens recovered at their position (exact token)",
        baseline=max(chance, positional),
        quality=r.slot_recovery,
        detail=f"token recovery {r.token_recovery:.3g}, ROUGE-L {r.rouge_l:.3g}; baseline: "
        f"positional prior {r.baseline_slot:.3g} of the slots, chance {r.chance:.3g}",
    )


def risk_of(rows: Sequence[Any], cfg: Any) -> RiskCard:
    """The card of the defense setting whose transcript leaks the most slot values."""
    by_setting: dict[str, list[AttackFinding]] = defaultdict(list)
    for r in rows:
        if isinstance(r, AttackRow) and r.slots > 0:
            by_setting[r.setting].append(_finding(r))
    releases: dict[str, Release] = {
        f"split-learning transcript of a language model, defense {name!r}": (found, [])
        for name, found in by_setting.items()
    }
    return riskiest_card(releases)
