"""The risk card of split-llm-mixguard on synthetic rows, both sides."""

from __future__ import annotations

from trainleak.experiments._mixguard_risk import risk_of
from trainleak.experiments.split_llm_mixguard_claims import AttackRow, UtilityRow


def _row(setting: str, slot: float, base: float = 0.0, slots: int = 200) -> AttackRow:
    return AttackRow(
        setting, setting, 0.0, "split-lm-inverter", 0.9, slot, 0.8, 0.3, base, 0.3, 0.01, slots
    )


def test_undefended_slots_recovered_is_high_and_names_the_setting() -> None:
    rows = [UtilityRow("none", "none", 0.0, 0.8, 0.0), _row("none", 0.95), _row("mg", 0.0)]
    card = risk_of(rows, None)
    assert card.level == "high"
    assert card.attack is not None and card.attack.recovered == 190 and card.attack.of == 200
    assert "'none'" in card.release


def test_slots_at_chance_or_below_the_positional_prior_are_not_high() -> None:
    # 1% recovered = chance (1 / pool_size): nothing beyond the baseline
    assert risk_of([_row("mg", 0.01)], None).level != "high"
    # the positional prior already gets 20% of the slots; the attack gets 15%
    card = risk_of([_row("noise", 0.15, base=0.2)], None)
    assert card.level != "high"
    assert card.attack is not None and card.attack.baseline_recovered == 40
