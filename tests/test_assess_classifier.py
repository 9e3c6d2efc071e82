"""Assessing a user's own classifier for model inversion, end to end through ``trainleak
assess``: digits 0-4 are the private classes, 5-9 the public data the adversary's generative
prior is trained on. A trained classifier gives its classes away (high risk, beyond the prior's
own samples at the same budget); an untrained one of the same architecture does not."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from scipy.stats import binom

from assess_helpers import assess_cli
from trainleak.audit.assess import assess
from trainleak.audit.assess_classes import chance_quantile
from trainleak.audit.assess_scoring import ReferenceSet
from trainleak.data import load_digits
from trainleak.errors import MetadataError
from trainleak.models.registry import build_model, model_spec
from trainleak.releases.classifier import ClassifierRelease, GenerativePrior
from trainleak.releases.io import load_release
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.classifier import PriorSettings, TrainSettings, train_classifier, train_prior

CLASSES = tuple("01234")


@lru_cache(maxsize=1)
def _world() -> tuple[ClassifierRelease, ClassifierRelease, GenerativePrior, ReferenceSet]:
    ds = load_digits()
    priv, pub = ds.y < 5, ds.y >= 5
    x, y = ds.x[priv][:700], ds.y[priv][:700]
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[64, 64], out_dim=5)
    trained = train_classifier(x, y, CLASSES, spec, settings=TrainSettings(steps=300), seed=0)
    state = {k: v.detach().clone() for k, v in build_model(spec, seed=5).state_dict().items()}
    untrained = ClassifierRelease(spec, state, CLASSES, (1, 8, 8))
    prior = train_prior(
        ds.x[pub],
        PriorSettings(latent_dim=8, hidden=(64, 128), steps=800),
        public_classes=tuple("56789"),
    )
    return trained.release, untrained, prior, ReferenceSet(x, y)


def test_trained_classifier_is_high_risk_and_untrained_is_not() -> None:
    trained, untrained, prior, ref = _world()
    know = Knowledge(generative_prior=prior)  # shape, range and classes come from the release
    found = {}
    for name, release in (("trained", trained), ("untrained", untrained)):
        a = assess(release, know, private=ref, seed=1)
        found[name] = (a.card.level, {r.name: r.scored.finding for r in a.runs if r.scored})
    level, findings = found["trained"]
    assert level == "high"
    assert findings["mi-adaptive"].unit == "private classes"  # the card counts classes
    for name in ("mi-standard", "mi-adaptive"):
        f = findings[name]
        assert f.of == 5 and f.candidates == 20
        # more classes than a release revealing nothing is credited with 95% of the time
        assert f.baseline_recovered is not None and f.recovered > f.baseline_recovered, f
    assert findings["mi-adaptive"].recovered >= 4
    level, findings = found["untrained"]
    assert level != "high"
    assert all(f.recovered <= (f.baseline_recovered or 0) for f in findings.values())
    assert max(f.recovered for f in findings.values()) <= 1


def test_cli_assesses_a_saved_classifier_with_a_prior_folder(tmp_path: Path) -> None:
    trained, _, prior, ref = _world()
    folder = trained.save(tmp_path / "release")
    prior.save(tmp_path / "prior")
    (tmp_path / "knowledge.yaml").write_text("generative_prior: prior\n")
    save_file({"x": ref.x, "y": ref.y}, str(tmp_path / "private.safetensors"))  # type: ignore[dict-item]
    assert load_release(folder).kind == "classifier"
    table, doc = assess_cli(
        folder, tmp_path / "knowledge.yaml", tmp_path / "private.safetensors", tmp_path / "out"
    )
    assert {"mi-standard", "mi-adaptive", "mi-prior-only"} <= set(table)
    assert doc["risk"]["level"] == "high"
    assert "of 5 private classes" in doc["risk"]["verdict"], doc["risk"]["verdict"]
    assert "images/mi-standard.png" in doc["artifacts"].values()


def test_a_reference_set_without_labels_is_refused_before_any_attack() -> None:
    trained, _, prior, ref = _world()
    with pytest.raises(MetadataError, match="labels of the private classes"):
        assess(trained, Knowledge(generative_prior=prior), private=ReferenceSet(ref.x))
    wrong = ReferenceSet(ref.x, torch.full_like(ref.y, 7))  # type: ignore[arg-type]
    with pytest.raises(MetadataError, match=r"labels in \[0, 5\)"):
        assess(trained, Knowledge(generative_prior=prior), private=wrong)


def test_chance_quantile_matches_the_binomial_law_for_equal_rates() -> None:
    for n, r in ((5, 0.2), (20, 0.05), (8, 0.5), (3, 0.0)):
        want = int(binom.ppf(0.95, n, r))  # smallest k with P(X <= k) >= 0.95
        assert chance_quantile([r] * n) == want, (n, r)
    assert chance_quantile([1.0, 1.0, 0.0]) == 2
    assert chance_quantile([0.5, 0.5]) == 2  # P(X <= 1) = 0.75 < 0.95
