"""Checkpoint releases: safetensors round trip, refusal of pickles, knowledge checks."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from trainleak.errors import MissingKnowledgeError, UnsafeFileError
from trainleak.models import build_model, model_spec
from trainleak.releases import Checkpoint, Knowledge, OptimizerSpec, load_state_dict


def _ckpt() -> Checkpoint:
    spec = model_spec("homogeneous_mlp", input_shape=(1, 4, 4), hidden=[8], out_dim=1)
    model = build_model(spec, seed=1)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return Checkpoint(
        architecture=spec,
        final={k: 2 * v for k, v in state.items()},
        initial=state,
        optimizer=OptimizerSpec(name="adam", lr=1e-3, params={"eps": 1e-16}),
    )


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    ckpt = _ckpt()
    loaded = Checkpoint.load(ckpt.save(tmp_path / "ck"))
    assert loaded.architecture == ckpt.architecture
    assert loaded.optimizer == ckpt.optimizer
    assert loaded.initial is not None
    for k, v in ckpt.final.items():
        torch.testing.assert_close(loaded.final[k], v, rtol=0, atol=0)
        torch.testing.assert_close(loaded.initial[k], ckpt.initial[k], rtol=0, atol=0)
    model = build_model(loaded.architecture, state=loaded.final)
    assert model(torch.zeros(2, 1, 4, 4)).shape == (2, 1)


def test_pickle_checkpoint_is_refused_with_reason(tmp_path: Path) -> None:
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"w": [1.0, 2.0]}))
    with pytest.raises(UnsafeFileError, match="pickle"):
        Checkpoint.load(path)
    with pytest.raises(UnsafeFileError, match="arbitrary code"):
        load_state_dict(path)


def test_pickle_with_pt_suffix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    path.write_bytes(pickle.dumps({"w": 1}, protocol=4))
    with pytest.raises(UnsafeFileError):
        load_state_dict(path)


def test_torch_file_with_objects_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save({"w": torch.ones(2), "opt": _Opaque()}, path)
    with pytest.raises(UnsafeFileError, match="weights_only|arbitrary"):
        load_state_dict(path)


def test_plain_torch_state_dict_loads(tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save({"w": torch.arange(3.0)}, path)
    torch.testing.assert_close(load_state_dict(path)["w"], torch.arange(3.0))


def test_missing_checkpoint_file_names_it(tmp_path: Path) -> None:
    (tmp_path / "ck").mkdir()
    with pytest.raises(FileNotFoundError, match="weights.safetensors"):
        Checkpoint.load(tmp_path / "ck")


def test_knowledge_require_names_missing_fields() -> None:
    k = Knowledge(input_shape=(1, 8, 8))
    k.require({"input_shape"}, who="X")
    with pytest.raises(MissingKnowledgeError, match="value_range"):
        k.require({"input_shape", "value_range"}, who="X")


class _Opaque:
    pass
