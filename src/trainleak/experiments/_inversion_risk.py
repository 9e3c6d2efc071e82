"""The risk card of ``model-inversion-adaptive`` and ``atat-privacy``: the target model whose
released weights let a generative attack produce the most class reconstructions that an
evaluator (trained on the private classes) identifies, beyond the baseline.

Rule (the experiments' own, Acc@1): a reconstruction of class ``y`` counts when the evaluator
(standard, robust or dlib) predicts ``y``; ``recovered = round(acc1 * n)`` of the ``n`` images
scored. Baseline, by the same rule: the prior-only attack at the same candidate budget on the
same target and evaluator where the run measured it (every target in seed 3, only the
drop-layer model in seed 8), and never below chance, ``n / c``: the exact expected count of
images whose class the evaluator names when the images carry no information about their
(balanced) labels. No bound: nothing in these runs bounds inversion.

Struppek et al., ICML 2022 (PPA); Torp, Smith and Breuer, ICLR 2026 (AT-AT).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trainleak.experiments.model_inversion_claims import AttackRow, Row
from trainleak.experiments.risk import (
    AttackFinding,
    Release,
    RiskCard,
    riskiest_card,
    scored_finding,
    share_count,
)

BASELINE = "prior_only"


def _baseline(r: AttackRow, base: AttackRow | None) -> tuple[int, str]:
    """The count a reconstruction carrying no class information reaches: the measured prior-only
    baseline on this target and evaluator, or chance where that is higher (or not measured)."""
    chance = math.ceil(r.n * r.chance - 1e-9)
    text = f"chance {r.n * r.chance:.3g} of {r.n} (1 / {round(1 / r.chance)} classes)"
    if base is None:
        return chance, f"{text}; the run measured no prior-only baseline on this target"
    measured = share_count(base.acc1, base.n)
    return max(measured, chance), f"prior-only baseline (same budget) {measured}; {text}"


def _finding(r: AttackRow, base: AttackRow | None) -> AttackFinding:
    baseline, text = _baseline(r, base)
    return scored_finding(
        f"{r.attack} generative inversion ({r.evaluator} evaluator)",
        share_count(r.acc1, r.n),
        r.n,
        rule=f"class reconstructions the {r.evaluator} evaluator identifies as their class (Acc@1)",
        baseline=baseline,
        quality=r.acc1,
        detail=f"Acc@1 {r.acc1:.3g} [{r.acc1_lo:.3g}, {r.acc1_hi:.3g}]; baseline: {text}",
        unit="class reconstructions",
    )


def risk_of(rows: Sequence[Row], cfg: object) -> RiskCard:
    """The card of the target model inverted the most beyond its baseline, over every attack
    and evaluator the run scored on it."""
    attack_rows = [r for r in rows if isinstance(r, AttackRow)]
    base = {(r.target, r.evaluator): r for r in attack_rows if r.attack == BASELINE}
    releases: dict[str, Release] = {}
    for r in attack_rows:
        if r.attack == BASELINE:
            continue
        name = f"the {r.target} classifier ({r.family} training), white-box"
        found = _finding(r, base.get((r.target, r.evaluator)))
        releases[name] = ([*releases.get(name, ([], []))[0], found], [])
    return riskiest_card(releases)
