"""The Python assessment API: attacks that apply, scoring with and without a reference set,
bounds from the release's declarations, refusals before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import trainleak
from release_files import SPEC, weights, write_checkpoint
from release_fixtures import tiny_malicious_update
from trainleak.attacks.gradient._common import tiny_batch
from trainleak.attacks.gradient.dlg import DLG
from trainleak.audit.assess import ReferenceSet, assess
from trainleak.errors import ConfigError, NonFiniteWeightsError
from trainleak.models import build_model, model_spec
from trainleak.releases import Knowledge
from trainleak.systems.federated.client import fedsgd_update

QUICK = {"dlg": {"iterations": 3}, "idlg": {"iterations": 3}}
QUICK["inverting-gradients"] = {"iterations": 3}


def test_certified_recovery_without_ground_truth_is_high_risk() -> None:
    upd, know = tiny_malicious_update(batch=6)
    a = trainleak.assess(upd, know, settings=QUICK)
    assert a.run("erasure-decoding-active").status == "done"
    card = a.card
    assert card.level == "high" and card.attack is not None
    assert card.attack.attack.startswith("erasure-decoding")
    assert card.attack.certainty == "certified" and card.attack.recovered == 6
    assert card.attack.of == 6 and "6 of 6" in card.verdict
    dlg = a.run("dlg").scored
    assert dlg is not None and dlg.finding.recovered is None  # nothing scores a DLG candidate


def test_reference_set_scores_but_never_reaches_an_attack() -> None:
    upd, know = tiny_malicious_update(batch=6)
    x, y = tiny_batch(6, 12, 0)  # the batch behind the update
    blind = assess(upd, know, attacks=["dlg", "imprint"], settings={"dlg": {"iterations": 3}})
    seen = assess(upd, know, private=ReferenceSet(x, y), attacks=["dlg", "imprint"],
                  settings={"dlg": {"iterations": 3}})  # fmt: skip
    for name in ("dlg", "imprint"):
        r0, r1 = blind.run(name).reconstruction, seen.run(name).reconstruction
        assert r0 is not None and r1 is not None and torch.equal(r0.inputs, r1.inputs)
    imprint = seen.run("imprint").scored
    assert imprint is not None and imprint.finding.certainty == "ground truth"
    assert imprint.finding.recovered == 6 and imprint.finding.baseline_recovered == 0
    dlg = seen.run("dlg").scored
    assert dlg is not None and dlg.finding.recovered == 0 and dlg.finding.error is not None
    assert seen.card.attack is not None and seen.card.attack.attack == "imprint"
    assert seen.card.level == "high" and seen.reference_size == 6


def test_large_batch_gets_the_counting_bound() -> None:
    spec = model_spec("mlp", input_shape=(4,), hidden=[3], out_dim=2)
    params = {k: v.double() for k, v in build_model(spec, seed=0).state_dict().items()}
    x, y = torch.rand(8, 4, dtype=torch.float64), torch.arange(8) % 2
    upd = fedsgd_update(spec, params, x, y)  # d = 23 values, B p = 32 > d
    a = assess(upd, Knowledge(), attacks=["dlg"], settings={"dlg": {"iterations": 2}})
    assert a.card.bound is not None and a.card.bound.value == 32 - 23
    assert "cannot single out" in a.card.bound.statement
    small = fedsgd_update(spec, params, x[:2], y[:2])
    b = assess(small, Knowledge(), attacks=["dlg"], settings={"dlg": {"iterations": 2}})
    assert b.bounds == [] and any("counting allows" in s.reason for s in b.skipped_bounds)


def test_declared_dp_schedule_and_prior_give_bounds(tmp_path: Path) -> None:
    dp = {"sampling_rate": 0.01, "noise_multiplier": 1.0, "steps": 100}
    write_checkpoint(tmp_path, weights(), dp_sgd=dp)
    prior = torch.rand(60, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    know = Knowledge(value_range=(0.0, 1.0), prior=prior)
    a = assess(tmp_path, know, attacks=["prototypes"])  # refuses this architecture
    assert a.run("prototypes").status == "not applicable"
    names = {b.name for b in a.bounds}
    assert {"DP-SGD rate-distortion bound", "Guo et al. 2022 (unbiased estimators)"} <= names
    assert a.card.level == "unmeasured" and a.card.bound is not None
    assert a.card.bound.name == "DP-SGD rate-distortion bound" and a.card.bound.value > 0
    no_prior = assess(tmp_path, Knowledge(), attacks=["prototypes"])
    assert {b.name for b in no_prior.bounds} == {"Guo et al. 2022 (unbiased estimators)"}
    assert no_prior.card.bound is not None and not no_prior.card.bound.general


def test_missing_knowledge_is_reported_not_guessed(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, weights())
    a = assess(tmp_path, None, attacks=["kkt"])  # input_shape comes from the spec, no range
    assert a.knowledge.input_shape == tuple(SPEC.kwargs["input_shape"])
    run = a.run("kkt")
    assert run.status == "needs knowledge" and "value_range" in run.reason
    assert a.card.level == "unmeasured"


def test_bad_settings_and_files_refused_before_anything_runs(tmp_path: Path) -> None:
    upd, know = tiny_malicious_update()
    with pytest.raises(ConfigError, match="'kkt'"):
        assess(upd, know, attacks=["kkt"])  # not an attack on gradient updates
    with pytest.raises(ConfigError, match="no setting 'steps'"):
        assess(upd, know, settings={"dlg": {"steps": 3}})
    with pytest.raises(ConfigError, match="iterations"):
        assess(upd, know, settings={"dlg": {"iterations": -1}})
    w = weights()
    w["layers.0.weight"][0, 0] = float("inf")
    write_checkpoint(tmp_path, w)
    with pytest.raises(NonFiniteWeightsError, match="layers.0.weight"):
        assess(tmp_path / "release.json")


def test_knowledge_file_path_is_accepted(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, weights())
    (tmp_path / "k.json").write_text(json.dumps({"value_range": [-1, 1]}))
    a = assess(tmp_path, tmp_path / "k.json", attacks=["kkt"], settings={"kkt": {"steps": 5}})
    assert a.run("kkt").status == "done" and a.card.level == "review"


def test_one_attack_crashing_is_reported_and_the_others_run(monkeypatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise IndexError("index 7 is out of bounds")

    monkeypatch.setattr(DLG, "run", broken)
    upd, know = tiny_malicious_update(batch=4)
    a = assess(upd, know, attacks=["dlg", "imprint"])
    assert a.run("dlg").status == "failed" and "IndexError: index 7" in a.run("dlg").reason
    assert a.run("imprint").status == "done" and a.card.attack is not None
