"""The kkt-reconstruction experiment end to end on a tiny config (wiring, not quality)."""

from __future__ import annotations

import pytest

from trainleak.errors import ConfigError
from trainleak.experiments import get_experiment

TINY = {
    "per_class": 6,
    "hidden": [64],
    "train_steps": 400,
    "attack_steps": 30,
    "candidates_per_image": 1.0,
}


def test_tiny_run_produces_tables_claims_and_grid() -> None:
    exp = get_experiment("kkt-reconstruction")
    result = exp.run(exp.make_config(TINY))
    raw = result.tables["raw (Haim et al. protocol)"]
    methods = [r["method"] for r in raw]
    assert methods[0] == "kkt attack"
    assert {"random uniform", "training mean image", "kkt on untrained net"} <= set(methods)
    assert all(r["n"] == 12 for r in raw)
    assert result.metrics["n_candidates"] == 12
    assert result.images["reconstruction_grid"].ndim in (2, 3)
    assert "training_and_attack" in result.figures
    texts = [c.text for c in result.claims]
    assert any("margin regime" in t for t in texts)
    # every claim's verdict is consistent with its own evidence
    for claim in result.claims:
        ev = claim.evidence
        if "baseline_count" in ev:
            assert claim.holds == (ev["attack"] > ev["baseline_count"])


def test_invalid_config_names_field() -> None:
    exp = get_experiment("kkt-reconstruction")
    with pytest.raises(ConfigError, match="per_class"):
        exp.make_config({"per_class": 0})
    with pytest.raises(ConfigError, match="dataset"):
        exp.make_config({"dataset": "imagenet"})
