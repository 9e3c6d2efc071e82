"""The risk card of ``transformer-gradient-inversion``: the FedSGD update (model, sweep point)
from which an attack recovers the most client sequences exactly.

Rule: a sequence counts when the attack recovers it token for token (the experiment's
``exact_rate`` times the batch size); token accuracy and ROUGE-1 go in the detail. Baseline,
by the same rule and on the same release: the bag-of-words attack, which reads the tokens off
the embedding gradient but orders them by nothing (the experiment's own baseline). DAGER's
certified sequences are carried as the finding's certificate. No bound: the DP-SGD cells
record a noise multiplier, not an accounted guarantee.

Petrov et al., DAGER, NeurIPS 2024; Kalikman et al., TIGER, arXiv 2606.18312 (2026).
"""

from __future__ import annotations

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
from trainleak.experiments.transformer_inversion_claims import Row

BASELINE = "bag-of-words"
RULE = "sequences recovered exactly (every token in place)"


def _release(r: Row) -> str:
    noise = f"DP-SGD noise multiplier {r.dp:g}" if r.part == "dp" else f"noise {r.noise:g} x RMS"
    return (
        f"the {r.model}'s FedSGD update on a batch of {r.batch} sequences of {r.length} tokens "
        f"({noise}; {r.part} sweep)"
    )


def _finding(r: Row, base: Row | None) -> AttackFinding:
    detail = f"token accuracy {r.token_accuracy:.3g}, ROUGE-1 {r.rouge1:.3g}"
    if base is not None:
        detail += f"; bag-of-words: token accuracy {base.token_accuracy:.3g}"
    return scored_finding(
        r.attack,
        share_count(r.exact_rate, r.batch),
        r.batch,
        rule=RULE,
        baseline=None if base is None else share_count(base.exact_rate, base.batch),
        quality=r.token_accuracy,
        detail=detail,
        certified=r.certified or None,
    )


def risk_of(rows: Sequence[Row], cfg: Any) -> RiskCard:
    """The card of the update whose best attack recovers the most sequences exactly beyond
    the bag-of-words baseline on the same update."""
    base = {_release(r): r for r in rows if r.attack == BASELINE}
    releases: dict[str, Release] = {}
    for r in rows:
        if r.attack == BASELINE:
            continue
        name = _release(r)
        found = [*releases.get(name, ([], []))[0], _finding(r, base.get(name))]
        releases[name] = (found, [])
    return riskiest_card(releases)
