"""The risk card: strongest attack and bound, the gap, the verdict (each level on both sides),
and its rendering at the top of a report with the attack-against-bound plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainleak.audit import write_report
from trainleak.audit.serialize import dumps
from trainleak.experiments.fedsgd_batch_recovery import FedSGDRecoveryConfig, RecoveryRow
from trainleak.experiments.fedsgd_batch_recovery import risk_of as fedsgd_risk
from trainleak.experiments.risk import (
    AttackFinding,
    BoundFinding,
    gap,
    risk_card,
    strongest_attack,
    strongest_bound,
    verdict,
)


def _found(name: str = "a", **kw: object) -> AttackFinding:
    args: dict[str, object] = {"attack": name, "candidates": 10, "recovered": None, "of": 10}
    args.update(kw)
    return AttackFinding(**args)  # type: ignore[arg-type]


MSE_BOUND = BoundFinding(
    "rd", 0.02, "mean squared error per coordinate, [0, 1] scale", "lower", "MSE >= 0.02"
)
UNBIASED = BoundFinding(
    "guo", 0.3, "mean squared error per coordinate, [0, 1] scale", "lower", "x", general=False
)
SUCCESS = BoundFinding("hayes", 0.2, "success probability", "upper", "success <= 0.2")


def test_certified_recovery_is_high_risk_and_uncertified_is_not() -> None:
    cert = _found("erasure", recovered=4, of=4, certainty="certified", certified=4)
    level, text = verdict(cert, None)
    assert level == "high" and "erasure recovered 4 of 4" in text and "No lower bound" in text
    none_cert = _found("erasure", recovered=0, of=4, certainty="certified", certified=0)
    assert verdict(none_cert, None)[0] == "review"  # uncertified candidates remain unscored
    assert verdict(_found("dlg"), None)[0] == "review"


def test_ground_truth_recovery_must_beat_the_baseline() -> None:
    beats = _found(recovered=5, certainty="ground truth", baseline_recovered=2)
    level, text = verdict(beats, MSE_BOUND)
    assert level == "high" and "a baseline given the same budget: 2" in text
    ties = _found(recovered=5, certainty="ground truth", baseline_recovered=5)
    assert verdict(ties, MSE_BOUND)[0] == "low"
    level, text = verdict(ties, None)
    assert level == "unproven" and "no more than a baseline given the same budget (5)" in text
    assert verdict(ties, UNBIASED)[0] == "unproven"  # a bound for unbiased estimators only


def test_nothing_ran_is_unmeasured() -> None:
    level, text = verdict(None, SUCCESS)
    assert level == "unmeasured" and "success <= 0.2" in text
    card = risk_card("r", [], [SUCCESS])
    assert card.level == "unmeasured" and card.attack is None and card.bound == SUCCESS


def test_strongest_attack_prefers_recovery_then_certificates_then_fewer_candidates() -> None:
    unscored = _found("dlg", candidates=50)
    weak = _found("b", recovered=1, certainty="ground truth", baseline_recovered=1)
    strong = _found("c", recovered=3, certainty="ground truth", baseline_recovered=0)
    assert strongest_attack([unscored, weak, strong]) == strong
    assert strongest_attack([weak, unscored]) == unscored  # unknown outranks "nothing beyond"
    many = _found("imprint", recovered=3, certainty="ground truth", candidates=15, quality=1.0)
    cert = _found("erasure", recovered=3, certainty="ground truth", quality=1.0, certified=3)
    assert strongest_attack([many, cert]) == cert
    few = _found("few", recovered=3, certainty="ground truth", candidates=3, quality=1.0)
    assert strongest_attack([many, few]) == few
    assert strongest_attack([]) is None


def test_strongest_bound_prefers_general_then_error_scale_then_tightness() -> None:
    assert strongest_bound([UNBIASED, MSE_BOUND]) == MSE_BOUND  # although 0.3 > 0.02
    assert strongest_bound([SUCCESS, MSE_BOUND]) == MSE_BOUND
    tighter = BoundFinding("h2", 0.1, "success probability", "upper", "s")
    assert strongest_bound([SUCCESS, tighter]) == tighter
    counting = BoundFinding("count", 500.0, "dimensions of batches", "lower", "c")
    assert strongest_bound([counting, SUCCESS]) == SUCCESS
    assert strongest_bound([]) is None


def test_gap_on_one_scale_and_not() -> None:
    scored = _found(recovered=2, of=10, certainty="ground truth", error=0.05, quality_metric="q")
    g = gap(scored, MSE_BOUND)
    assert g.scale == "mse" and g.value == pytest.approx(0.03) and "2.5 times" in g.text
    s = gap(scored, SUCCESS)
    assert s.scale == "success" and s.attack_value == pytest.approx(0.2) and s.value == 0.0
    assert gap(_found(), SUCCESS).scale == ""  # unscored: no rate to compare
    assert gap(None, MSE_BOUND).text.startswith("not measured")


def _result_dir(folder: Path, risk: object, claims: list[dict[str, object]]) -> Path:
    folder.mkdir(parents=True)
    doc = {"experiment": "x", "config": {}, "metrics": {}, "claims": claims, "risk": risk}
    (folder / "result.json").write_text(dumps(doc))
    return folder


def test_report_shows_the_card_first_and_the_plot(tmp_path: Path) -> None:
    attack = _found("kkt", recovered=3, of=8, certainty="ground truth", baseline_recovered=0,
                    error=0.04, quality_metric="SSIM >= 0.6")  # fmt: skip
    card = risk_card("Checkpoint(mlp)", [attack], [MSE_BOUND])
    a = _result_dir(tmp_path / "a", card, [])
    b = _result_dir(tmp_path / "b", None, [{"text": "c", "holds": True}])
    html = write_report([a, b], tmp_path / "r.html").read_text()
    first = html.index('<h2 id="run-0"')
    assert html.index("Risk card", first) < html.index("<h3>", html.index("</div></div>", first))
    assert "HIGH RISK" in html.upper() and "kkt recovered 3 of 8" in html
    assert "1 of 1 of its claims hold" in html  # the run without a card says so
    assert 'alt="attack against bound"' in html  # one run has both on one scale
    doc = json.loads((a / "result.json").read_text())
    assert doc["risk"]["gap"]["scale"] == "mse"
    only_b = write_report([b], tmp_path / "b.html").read_text()
    assert "no run has its strongest attack and its strongest bound on one scale" in only_b


CFG = FedSGDRecoveryConfig()


def _row(attack: str, b: int, rate: float, certified: float) -> RecoveryRow:
    return RecoveryRow(
        dataset="mnist", attack=attack, model="malicious", groups=3, train_steps=None, trial=0,
        B=b, neurons=2 * b, exact_rate=rate, label_accuracy=1.0, certified_fraction=certified,
        false_certificates=0, mean_psnr=90.0, max_error=0.0, batch_certified=False,
        attack_s=0.1, client_s=0.01, time_ratio=10.0,
    )  # fmt: skip


def test_fedsgd_experiment_card_names_the_strongest_update() -> None:
    rows = [_row("imprint", 128, 0.5, 0.0), _row("erasure-decoding-active", 64, 1.0, 1.0),
            _row("erasure-decoding-active", 128, 0.9, 0.9)]  # fmt: skip
    card = fedsgd_risk(rows, CFG)
    assert card.level == "high" and card.attack is not None
    assert card.attack.recovered == 115 and "batch of 128" in card.release  # 0.9 x 128 > 64
    assert "riskiest of 3 releases" in card.release
    assert card.attack.certified == 115
    tie = fedsgd_risk(
        [_row("imprint", 64, 1.0, 0.0), _row("erasure-decoding-active", 64, 1.0, 1.0)], CFG
    )
    assert tie.attack is not None and tie.attack.attack.startswith("erasure")  # certified wins
    nothing = fedsgd_risk([_row("imprint", 64, 0.0, 0.0)], CFG)
    assert nothing.level == "unproven" and nothing.bound is None
