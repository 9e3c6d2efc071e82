"""The KKT experiments end to end on tiny configs (wiring, not quality)."""

from __future__ import annotations

import pytest

from trainleak.errors import ConfigError
from trainleak.experiments import get_experiment
from trainleak.experiments._kkt_claims import CLAIMS
from trainleak.experiments._kkt_common import EQUAL_BUDGET, ORACLE

TINY = {
    "per_class": 6,
    "hidden": [64],
    "train_steps": 400,
    "attack_steps": 30,
    "candidates_per_image": 1.0,
    "seeds": 2,
}


def test_tiny_run_produces_rows_claims_and_grid() -> None:
    exp = get_experiment("kkt-reconstruction")
    result = exp.run(exp.make_config(TINY))
    scores = result.tables["scores (every method, every seed)"]
    assert {r["seed"] for r in scores} == {0, 1}
    methods = {r["method"]: r for r in scores if r["seed"] == 0}
    assert {"kkt attack", "kkt on untrained net", ORACLE, *EQUAL_BUDGET} == set(methods)
    assert all(r["n"] == 12 for r in scores)
    # every method except the labelled oracle gets the attack's 12 candidates
    assert {r["candidates"] for r in scores if r["role"] != "oracle"} == {12}
    assert methods[ORACLE]["role"] == "oracle"
    assert all(0 <= r["specific"] <= r["n"] for r in scores)
    assert len(result.tables["training and attack (per seed)"]) == 2
    assert len(result.claims) == len(CLAIMS)
    assert result.images["reconstruction_grid"].ndim in (2, 3)
    assert "training_and_attack" in result.figures
    card = result.risk  # one checkpoint per seed; the card names the riskiest one
    assert card is not None and card.attack is not None and "of 2 releases" in card.release
    assert card.attack.of == 12 and card.attack.baseline_recovered is not None
    # every two-seed comparison was decided by a paired interval, not by means
    tests = [c.evidence.get("test", "") for c in result.claims if "attack" in c.evidence]
    assert tests and all("paired t over 2 seeds" in t for t in tests)


def test_invalid_config_names_field() -> None:
    exp = get_experiment("kkt-reconstruction")
    with pytest.raises(ConfigError, match="per_class"):
        exp.make_config({"per_class": 0})
    with pytest.raises(ConfigError, match="dataset"):
        exp.make_config({"dataset": "imagenet"})
    with pytest.raises(ConfigError, match="pool"):
        exp.make_config({"pool": "test"})


def test_tiny_fingerprints_run() -> None:
    exp = get_experiment("optimizer-fingerprints")
    cfg = exp.make_config(
        {
            "datasets": ["digits"],
            "optimizers": ["gd", "adam-eps1e-16"],
            "seeds": 2,
            "per_class": 4,
            "hidden": 16,
            "train_steps": {"gd": 200, "adam-eps1e-16": 100},
            "attack_steps": 10,
            "residual_steps": 3,
        }
    )
    result = exp.run(cfg)
    runs = result.tables["runs"]
    assert [(r["optimizer"], r["seed"]) for r in runs] == [
        ("gd", 0),
        ("gd", 1),
        ("adam-eps1e-16", 0),
        ("adam-eps1e-16", 1),
    ]
    scores = result.tables["scores (every method, every run)"]
    assert {r["candidates"] for r in scores if r["role"] != "oracle"} == {16}
    assert len(result.claims) == 4 and all(c.text.startswith("digits:") for c in result.claims)
    adam = next(c for c in result.claims if "Adam" in c.text)
    gd = next(c for c in result.claims if "GD checkpoints" in c.text)
    # "Adam resists" is only decided where GD reconstructs
    assert ("not_tested" in adam.evidence) == (not gd.holds)
    assert "fingerprints" in result.figures
