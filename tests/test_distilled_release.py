"""The distilled-set release and the adversary's knowledge: bad input gives clear errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from release_fixtures import tiny_distilled
from trainleak.attacks.distillation import InformationRevelation, NearestSyntheticMembership
from trainleak.errors import ConfigError, DataNotFoundError, ShapeError, TrainleakError
from trainleak.models import model_spec
from trainleak.releases.distilled import DistilledSet, ShadowBank, ShadowSet, check_architecture
from trainleak.systems.distillation import DMConfig, MTTConfig, distill


def _set(n: int = 4, **kw: object) -> DistilledSet:
    args: dict[str, object] = {
        "images": torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(0)),
        "labels": torch.arange(n) % 2,
        "num_classes": 2,
    }
    args.update(kw)
    return DistilledSet(**args)  # type: ignore[arg-type]


def test_labels_that_do_not_match_the_images_are_refused() -> None:
    with pytest.raises(ShapeError, match="4 images but 3 labels"):
        _set(labels=torch.tensor([0, 1, 0]))
    with pytest.raises(ShapeError, match="soft"):
        _set(labels=torch.full((4, 3), 1 / 3))
    with pytest.raises(ConfigError, match="labels"):
        _set(labels=torch.tensor([0, 1, 2, 0]))
    with pytest.raises(ConfigError, match="summing to 1"):
        _set(labels=torch.full((4, 2), 0.7))


def test_images_outside_the_declared_range_are_refused() -> None:
    with pytest.raises(ConfigError, match="value_range"):
        _set(images=torch.rand(4, 1, 8, 8) * 2 - 1)
    with pytest.raises(ConfigError, match="finite"):
        _set(images=torch.full((4, 1, 8, 8), float("nan")))
    with pytest.raises(ConfigError, match="value_range"):
        _set(value_range=(1.0, 0.0))
    ok = _set(images=torch.rand(4, 1, 8, 8) * 2 - 1, value_range=(-1.0, 1.0))
    assert ok.input_shape == (1, 8, 8)


def test_soft_labels_and_lr_are_accepted_and_saved(tmp_path: Path) -> None:
    soft = torch.softmax(torch.randn(4, 2, generator=torch.Generator().manual_seed(1)), 1)
    rel = _set(labels=soft, lr=0.02)
    assert rel.soft and rel.hard_labels.tolist() == soft.argmax(1).tolist()
    back = DistilledSet.load(rel.save(tmp_path / "s"))
    assert back.content_hash() == rel.content_hash() and back.lr == 0.02
    assert _set().content_hash() != rel.content_hash()
    with pytest.raises(ConfigError, match="lr"):
        _set(lr=0.0)


def test_a_candidate_architecture_that_cannot_take_the_images_is_refused() -> None:
    rel = _set()
    check_architecture(model_spec("mlp", input_shape=(1, 8, 8), hidden=[4], out_dim=2), rel)
    with pytest.raises(ConfigError, match=r"candidate_architectures.*\(1, 8, 8\)"):
        check_architecture(model_spec("mlp", input_shape=(3, 32, 32), hidden=[4], out_dim=2), rel)
    with pytest.raises(ConfigError, match="2 outputs"):
        check_architecture(model_spec("mlp", input_shape=(1, 8, 8), hidden=[4], out_dim=5), rel)
    release, know = tiny_distilled()
    bad = (*know.candidate_architectures, model_spec("convnet", input_shape=(1, 6, 6), out_dim=10))
    with pytest.raises(ConfigError, match="candidate_architectures"):
        InformationRevelation(steps=4, inits=1)(
            release, dataclasses.replace(know, candidate_architectures=bad)
        )


def test_an_empty_or_mixed_shadow_bank_is_refused() -> None:
    with pytest.raises(ConfigError, match="empty"):
        ShadowBank(())
    a = ShadowSet(_set(), "dm", "mlp")
    b = ShadowSet(_set(images=torch.rand(4, 1, 4, 4)), "dm", "mlp")
    with pytest.raises(ConfigError, match="one task"):
        ShadowBank((a, b))
    release, know = tiny_distilled()
    with pytest.raises(ConfigError, match="shadow bank's task"):
        ShadowBank((a,)).check_release(release)
    other = dataclasses.replace(know, candidate_algorithms=("dm",))
    with pytest.raises(ConfigError, match="other labels"):
        InformationRevelation(steps=4, inits=1)(release, other)


def test_membership_candidates_of_the_wrong_shape_are_refused() -> None:
    release, know = tiny_distilled()
    bad = dataclasses.replace(know, candidates=(torch.rand(3, 1, 4, 4), torch.zeros(3).long()))
    with pytest.raises(ConfigError, match="candidates"):
        NearestSyntheticMembership()(release, bad)


def test_distillation_configs_refuse_bad_values() -> None:
    with pytest.raises(ConfigError, match="ipc"):
        DMConfig(ipc=0)
    with pytest.raises(ConfigError, match="init"):
        DMConfig(init="zeros")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_start_epoch"):
        MTTConfig(expert_epochs=5, max_start_epoch=4, expert_steps=2)
    x = torch.rand(6, 1, 8, 8)
    y = torch.tensor([0, 0, 1, 1, 1, 1])
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[4], out_dim=2)
    with pytest.raises(ConfigError, match="ipc"):
        distill(x, y, 2, spec, DMConfig(ipc=3, iterations=1))
    noise = distill(x, y, 2, spec, DMConfig(ipc=3, iterations=1, init="noise"))
    assert noise.init_indices is None and len(noise.release) == 6


def test_a_damaged_saved_set_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    """Missing file, missing key and a pickle in place of the tensors: each names the file."""
    saved = _set().save(tmp_path / "s")
    meta = json.loads((saved / "set.json").read_text())
    del meta["num_classes"]
    (saved / "set.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match=r"set\.json.*num_classes"):
        DistilledSet.load(saved)
    torch.save(
        {"images": torch.zeros(1)}, saved / "set.safetensors", _use_new_zipfile_serialization=False
    )
    with pytest.raises(TrainleakError, match="set.safetensors"):
        DistilledSet.load(saved)
    (saved / "set.json").unlink()
    with pytest.raises(DataNotFoundError, match=r"set\.json is missing"):
        DistilledSet.load(saved)
