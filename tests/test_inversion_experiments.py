"""Both model-inversion experiments run end to end on a tiny MNIST configuration and return
typed tables, figures and every claim (their values are tested in test_inversion_claims)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainleak.errors import ConfigError
from trainleak.experiments import get_experiment

TINY: dict[str, Any] = {
    "n_private": 100,
    "n_public": 100,
    "n_test": 40,
    "target_steps": 10,
    "evaluator_steps": 5,
    "prior_steps": 20,
    "latent_dim": 4,
    "candidates": 10,
    "keep": 2,
    "final": 2,
    "attack_steps": 2,
    "adaptive_steps": 2,
    "feature_steps": 2,
    "restarts": 1,
    "model_augment": 0,
    "eps_grid": [0.0, 0.05],
    "n_robust": 20,
}


def test_model_inversion_adaptive_runs(data_dir: Path, tmp_path: Path) -> None:
    exp = get_experiment("model-inversion-adaptive")
    cfg = exp.make_config(
        {**TINY, "targets": ["standard", "negls", "atat"], "cache_dir": str(tmp_path)}
    )
    res = exp.run(cfg)
    assert len(res.claims) == 5
    assert {r["attack"] for r in res.tables["attacks"]} == {"standard", "adaptive", "prior_only"}
    assert {r["evaluator"] for r in res.tables["attacks"]} == {"standard", "robust"}
    assert len(res.tables["targets"]) == 3 and res.tables["leakage"]
    assert {"bars_standard", "robustness_vs_leakage"} <= set(res.figures)
    assert "prior_samples" in res.images and "grid_standard" in res.images
    assert any(tmp_path.iterdir())  # prior, evaluators and targets cached
    # each class's hits, for pooling target seeds by class, add up to every Acc@1
    hits = {(r["target"], r["attack"], r["evaluator"]): r for r in res.tables["class_hits"]}
    assert len(hits) == len(res.tables["attacks"]) == 3 * 3 * 2
    for r in res.tables["attacks"]:
        got = hits[(r["target"], r["attack"], r["evaluator"])]
        counts = [int(v) for v in got["hits"].split()]
        assert sum(counts) == round(r["acc1"] * r["n"]) and len(counts) == 5
        assert sum(int(v) for v in got["images"].split()) == r["n"]


def test_atat_privacy_runs(data_dir: Path, tmp_path: Path) -> None:
    exp = get_experiment("atat-privacy")
    cfg = exp.make_config(
        {**TINY, "atat_weights": [0.3], "atat_eps": [0.01], "use_cache": False, "reliance_seeds": 2}
    )
    res = exp.run(cfg)
    assert len(res.claims) == 8
    names = [r["target"] for r in res.tables["models"]]
    assert names == ["standard", "at", "atat-w0.3-e0.01", "memorise", "droplayer"]
    assert any(r["attack"] == "prior_only" for r in res.tables["attacks"])
    # the two-cue task: the standard, AT and AT-AT defenses, two seeds each
    got = [(r["target"], r["seed"]) for r in res.tables["reliance"]]
    assert got == [(n, s) for n in names[:3] for s in (0, 1)] and "cue_reliance" in res.figures
    assert all(r["to_robust"] + r["to_nonrobust"] <= r["n"] for r in res.tables["reliance"])
    # each model's standard-attack hits by class, for pooling target seeds (the benchmark)
    hits = {(r["target"], r["evaluator"]): r for r in res.tables["class_hits"]}
    standard = [r for r in res.tables["attacks"] if r["attack"] == "standard"]
    assert len(hits) == len(standard) == 5 * 2
    for r in standard:
        counts = [int(v) for v in hits[(r["target"], r["evaluator"])]["hits"].split()]
        assert sum(counts) == round(r["acc1"] * r["n"]) and len(counts) == 5


def test_unknown_target_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="targets"):
        get_experiment("model-inversion-adaptive").make_config({"targets": ["nope"]})
