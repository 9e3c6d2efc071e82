"""Mirror augmentation of the classifier simulator (issue 12, fourth pass): ``TrainSettings.flip``
reaches the training batches, and the model-inversion recipes pass it to every target."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from test_inversion_experiments import TINY
from trainleak.attacks.inversion import GenerativeInversion
from trainleak.attacks.inversion._latent import augmenter
from trainleak.errors import ConfigError
from trainleak.experiments import get_experiment
from trainleak.experiments._inversion_common import target_flip
from trainleak.models.registry import model_spec
from trainleak.scenarios.inversion import InversionTask
from trainleak.scenarios.inversion_targets import TARGETS, recipe
from trainleak.systems.classifier import TrainSettings, train_classifier


def _sides(n: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    """Class 0: the left half bright; class 1: the right half (mirror images of each other)."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(n) % 2
    x = 0.2 * torch.rand(n, 1, 8, 8, generator=g)
    x[y == 0, :, :, :4] += 0.7
    x[y == 1, :, :, 4:] += 0.7
    return x.clamp(0, 1), y


def test_flip_trains_on_mirror_images() -> None:
    x, y = _sides()
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[32], out_dim=2)
    acc = {
        flip: train_classifier(
            x, y, ("left", "right"), spec, settings=TrainSettings(steps=150, flip=flip), seed=0
        ).train_accuracy
        for flip in (False, True)
    }
    # the classes are mirror images: without flips they are separable, with flips each image
    # is also shown mirrored under its own label, so nothing separates them
    assert acc[False] >= 0.99, acc
    assert acc[True] <= 0.75, acc


def test_every_recipe_takes_the_flip() -> None:
    x = torch.rand(4, 1, 8, 8)
    y = torch.tensor([0, 1, 0, 1])
    task = InversionTask("t", (x, y), (x, y), (x, y), ("a", "b"), ("c", "d"))
    for name in TARGETS:
        assert recipe(name, task, 10, flip=True).settings.flip, name
        assert not recipe(name, task, 10).settings.flip, name


def test_faces_train_their_targets_on_mirrors_by_default() -> None:
    exp = get_experiment("model-inversion-adaptive")
    assert target_flip(exp.make_config({"dataset": "orl"}))
    assert not target_flip(exp.make_config({"dataset": "mnist"}))
    assert not target_flip(exp.make_config({"dataset": "orl", "target_flip": False}))
    assert target_flip(get_experiment("atat-privacy").make_config({"target_flip": True}))


@pytest.mark.parametrize(
    ("name", "only", "table", "new"),
    [
        ("model-inversion-adaptive", {"targets": ["standard"]}, "targets", 1),
        # standard, AT, one AT-AT, memorising and drop-layer models (no two-cue models)
        (
            "atat-privacy",
            {"atat_weights": [0.3], "atat_eps": [0.01], "reliance_seeds": 0},
            "models",
            5,
        ),
    ],
)
def test_target_seed_replicates_the_targets_under_the_same_prior_and_evaluators(
    data_dir: Path, tmp_path: Path, name: str, only: dict[str, object], table: str, new: int
) -> None:
    exp = get_experiment(name)
    tiny = {**TINY, **only, "cache_dir": str(tmp_path)}
    first = exp.run(exp.make_config(tiny))
    files = set(tmp_path.iterdir())
    again = exp.run(exp.make_config({**tiny, "target_seed": 3}))
    # new entries for the targets only; the prior and both evaluators were reused
    assert len(set(tmp_path.iterdir()) - files) == new
    assert first.tables[table] != again.tables[table]


def test_the_crop_strength_reaches_the_transforms() -> None:
    x = torch.rand(3, 1, 16, 16)
    g = torch.Generator().manual_seed(0)
    assert torch.allclose(augmenter(False, 0.0)(x, g), x, atol=1e-5)
    assert not torch.allclose(augmenter(False, 0.3)(x, g), x, atol=1e-2)
    with pytest.raises(ConfigError, match="crop"):
        GenerativeInversion(crop=1.0)


def test_models_trained_without_flips_keep_their_cache_keys() -> None:
    # the key of a model trained before the field existed (the repr the cache hashes)
    old = "TrainSettings(steps=600, lr=0.001, batch_size=128, weight_decay=0.0)"
    assert repr(TrainSettings(steps=600)) == old
    assert repr(TrainSettings(steps=600, flip=True)) == old[:-1] + ", flip=True)"
