"""The released classifier, the generative prior and the inversion scenario: bad input is
refused with a clear error; HSIC matches closed forms; the dlib evaluator is an optional
extra."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from conftest import require_data, require_module
from release_fixtures import tiny_classifier
from trainleak.data.faces import load_orl_faces
from trainleak.errors import ConfigError, DataNotFoundError, MissingExtraError, ShapeError
from trainleak.metrics import face_identity
from trainleak.metrics.hsic import hsic, hsic_from_grams
from trainleak.metrics.inversion import attack_accuracy, ratio_interval, spearman
from trainleak.models.registry import model_spec
from trainleak.releases.classifier import ClassifierRelease, GenerativePrior
from trainleak.scenarios.inversion import InversionTask, cached_classifier, check_evaluator


def test_output_size_must_match_the_class_list() -> None:
    release, _ = tiny_classifier()
    with pytest.raises(ConfigError, match="class list has 4 classes"):
        ClassifierRelease(release.spec, release.state, tuple("0123"), (1, 8, 8))


def test_inputs_of_wrong_shape_or_range_are_refused() -> None:
    release, _ = tiny_classifier()
    release.check_inputs(torch.rand(2, 1, 8, 8))
    with pytest.raises(ShapeError, match="input shape"):
        release.check_inputs(torch.rand(2, 1, 9, 8))
    with pytest.raises(ConfigError, match="range"):
        release.check_inputs(torch.rand(2, 1, 8, 8) * 2)


def test_prior_of_another_shape_or_trained_on_private_classes_is_refused() -> None:
    release, know = tiny_classifier()
    prior = know.generative_prior
    assert prior is not None
    prior.check_matches(release)
    other = ClassifierRelease(
        model_spec("mlp", input_shape=(1, 4, 16), hidden=[4], out_dim=5),
        {k: v for k, v in _mlp_state((1, 4, 16)).items()},
        tuple("01234"),
        (1, 4, 16),
    )
    with pytest.raises(ShapeError, match="trained on inputs of shape"):
        prior.check_matches(other)
    leaky = GenerativePrior(
        prior.spec, prior.state, prior.latent_dim, (1, 8, 8), (0.0, 1.0), ("4", "5")
    )
    with pytest.raises(ConfigError, match="private classes"):
        leaky.check_matches(release)
    with pytest.raises(ShapeError, match="produces images"):
        GenerativePrior(prior.spec, prior.state, prior.latent_dim, (1, 8, 9))


def _mlp_state(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    from trainleak.models.registry import build_model

    return build_model(
        model_spec("mlp", input_shape=shape, hidden=[4], out_dim=5), seed=0
    ).state_dict()


def test_evaluator_sharing_public_classes_is_refused() -> None:
    release, know = tiny_classifier()
    x = torch.rand(4, 1, 8, 8)
    y = torch.zeros(4, dtype=torch.long)
    task = InversionTask("t", (x, y), (x, y), (x, y), tuple("01234"), tuple("56789"))
    check_evaluator(release, task)
    shared = InversionTask("t", (x, y), (x, y), (x, y), tuple("01234"), tuple("4567"))
    with pytest.raises(ConfigError, match="shares classes"):
        check_evaluator(release, shared)


def test_release_round_trips_through_safetensors_and_the_cache(tmp_path: Path) -> None:
    release, know = tiny_classifier()
    loaded = ClassifierRelease.load(release.save(tmp_path / "r"))
    assert loaded.content_hash() == release.content_hash()
    assert know.generative_prior is not None
    prior = GenerativePrior.load(know.generative_prior.save(tmp_path / "p"))
    assert prior.content_hash() == know.generative_prior.content_hash()
    calls = []

    def build() -> ClassifierRelease:
        calls.append(1)
        return release

    for _ in range(2):
        again = cached_classifier("k", build, tmp_path / "cache")
    assert calls == [1] and again.content_hash() == release.content_hash()


def test_hsic_matches_closed_forms() -> None:
    # two points: K = [[1, k], [k, 1]], L likewise, biased HSIC = (1 - k)(1 - l) exactly
    x = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    z = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    k, l_ = math.exp(-1 / 2), math.exp(-4 / (2 * 0.5**2))
    assert float(hsic(x, z, 1.0, 0.5)) == pytest.approx((1 - k) * (1 - l_), rel=1e-12)
    # identity Gram matrices: tr(H H) / (n - 1)^2 = 1 / (n - 1); a constant kernel gives 0
    n = 7
    eye = torch.eye(n, dtype=torch.float64)
    assert float(hsic_from_grams(eye, eye)) == pytest.approx(1 / (n - 1), rel=1e-12)
    assert float(hsic_from_grams(eye, torch.ones(n, n, dtype=torch.float64))) == pytest.approx(
        0.0, abs=1e-12
    )
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(200, 2, generator=gen, dtype=torch.float64)
    b = torch.randn(200, 2, generator=gen, dtype=torch.float64)
    assert float(hsic(a, a)) > 10 * float(hsic(a, b))


def test_attack_accuracy_intervals_and_ratio() -> None:
    model = torch.nn.Linear(2, 3)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, 0], [0, 1.0], [-1.0, -1.0]]))
        model.bias.zero_()
    x = torch.tensor([[1.0, 0], [0, 1.0], [1.0, 0], [0, 1.0]]).view(4, 2)
    y = torch.tensor([0, 1, 1, 1])
    acc = attack_accuracy(model, x, y, 3)
    assert acc.acc1 == 0.75 and acc.acc5 == 1.0 and acc.per_class[0] == 1.0
    assert acc.acc1_interval[0] <= 0.75 <= acc.acc1_interval[1]
    point, lo, hi = ratio_interval([1, 1, 1, 0], [1, 0, 0, 0])
    assert point == 3.0 and lo <= 3.0 <= hi
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_dlib_evaluator_names_the_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(face_identity, "_MODEL_FILE", "models/no-such-file.dat")
    with pytest.raises(MissingExtraError, match="trainleak\\[faces\\]"):
        face_identity.model_file()


def test_dlib_evaluator_identifies_faces(data_dir: Path) -> None:
    require_module("dlib", "pip install 'trainleak[faces]'")
    ds = load_orl_faces(require_data(data_dir / "att_faces", "the ORL faces"))
    emb = face_identity.DlibEmbedder()
    x, y = ds.x[::5][:16], ds.y[::5][:16]  # images 1 and 6 of subjects 1-8
    ref, ry = ds.x[1::5][:16], ds.y[1::5][:16]
    ref_e = emb(ref)
    score = face_identity.identity_score(emb, x, y, ref_e, ry, 8)
    wrong = face_identity.identity_score(emb, x, (y + 1) % 8, ref_e, ry, 8)
    assert score.accuracy >= 0.75 and wrong.accuracy <= 0.25
    assert score.delta_face < wrong.delta_face


def test_a_saved_classifier_with_malformed_metadata_names_the_file(tmp_path: Path) -> None:
    release, _ = tiny_classifier()
    saved = release.save(tmp_path / "r")
    meta = json.loads((saved / "release.json").read_text())
    meta["input_shape"] = "not a shape"
    (saved / "release.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match=r"release\.json"):
        ClassifierRelease.load(saved)
    (saved / "weights.safetensors").unlink()
    with pytest.raises(DataNotFoundError, match=r"weights\.safetensors is missing"):
        GenerativePrior.load(saved)
