"""Loading a user's own release and knowledge files: every kind loads, every bad input is refused
with the documented error naming the file and the field."""

from __future__ import annotations

import functools
import json
import pickle
import struct
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file
from typer.testing import CliRunner

from release_files import SPEC, raw_safetensors, tensor_entry, weights, write_checkpoint
from trainleak import cli
from trainleak.errors import (
    DataNotFoundError,
    MalformedFileError,
    MetadataError,
    MissingExtraError,
    NonFiniteWeightsError,
    ReleaseFileError,
    SpecMismatchError,
    TrainleakError,
    UnsafeFileError,
)
from trainleak.models.tensor_files import read_tensor_file, sniff
from trainleak.releases import Checkpoint, GradientUpdate, io
from trainleak.releases.io import load_release
from trainleak.releases.knowledge_file import load_knowledge


def test_checkpoint_spec_and_safetensors_load(tmp_path: Path) -> None:
    w = weights(seed=3)
    spec = write_checkpoint(
        tmp_path, w, optimizer={"name": "gd", "lr": 0.5}, dtype="float32",
        training={"loss": "logistic", "steps": 10, "n_train": 8},
    )  # fmt: skip
    loaded = load_release(tmp_path)  # the folder works as well as the spec file
    assert loaded.source == spec and loaded.kind == "checkpoint"
    ckpt = loaded.release
    assert isinstance(ckpt, Checkpoint) and ckpt.architecture == SPEC
    assert ckpt.optimizer is not None and ckpt.optimizer.name == "gd"
    assert ckpt.training is not None and ckpt.training.n_train == 8
    for k, v in w.items():
        torch.testing.assert_close(ckpt.final[k], v, rtol=0, atol=0)


def test_tensor_names_map_a_plain_sequential(tmp_path: Path) -> None:
    w = weights()
    theirs = {"0.weight": w["layers.0.weight"], "0.bias": w["layers.0.bias"]}
    theirs["2.weight"] = w["layers.1.weight"]
    names = {"layers.0.weight": "0.weight", "layers.0.bias": "0.bias"}
    names["layers.1.weight"] = "2.weight"
    write_checkpoint(tmp_path, theirs, tensor_names=names)
    ckpt = load_release(tmp_path).release
    assert isinstance(ckpt, Checkpoint)
    torch.testing.assert_close(ckpt.final["layers.1.weight"], w["layers.1.weight"])


def test_torch_zip_file_loads_with_weights_only(tmp_path: Path) -> None:
    w = weights()
    torch.save(w, tmp_path / "model.pt")
    arch = {"kind": SPEC.kind, "kwargs": SPEC.kwargs}
    doc = {"type": "checkpoint", "architecture": arch, "weights": "model.pt"}
    (tmp_path / "release.json").write_text(json.dumps(doc))
    assert sniff(tmp_path / "model.pt") == "torch-zip"
    ckpt = load_release(tmp_path / "release.json").release
    assert isinstance(ckpt, Checkpoint)
    torch.testing.assert_close(ckpt.final["layers.0.weight"], w["layers.0.weight"])


def test_saved_checkpoint_and_update_folders_load(tmp_path: Path) -> None:
    w0, w1 = weights(0), weights(1)
    Checkpoint(SPEC, w1, w0).save(tmp_path / "ck")
    ck = load_release(tmp_path / "ck").release
    assert isinstance(ck, Checkpoint) and ck.initial is not None
    torch.testing.assert_close(ck.initial["layers.0.weight"], w0["layers.0.weight"])
    Checkpoint(SPEC, w1).save(tmp_path / "ck1")
    only = load_release(tmp_path / "ck1").release
    assert isinstance(only, Checkpoint) and only.initial is None
    upd = GradientUpdate(SPEC, w0, {k: v * 0.1 for k, v in w1.items()}, batch_size=2)
    upd.save(tmp_path / "up")
    got = load_release(tmp_path / "up").release
    assert isinstance(got, GradientUpdate) and got.batch_size == 2
    torch.testing.assert_close(got.update["layers.1.weight"], upd.update["layers.1.weight"])


def test_gradient_update_from_two_files(tmp_path: Path) -> None:
    save_file(weights(0), str(tmp_path / "params.safetensors"))
    torch.save({k: v * 0.01 for k, v in weights(1).items()}, tmp_path / "grad.pt")
    doc = {"type": "gradient_update", "architecture": {"kind": SPEC.kind, "kwargs": SPEC.kwargs},
           "parameters": "params.safetensors", "update": "grad.pt", "batch_size": 4,
           "dp_sgd": {"sampling_rate": 0.1, "noise_multiplier": 1.0, "steps": 1}}  # fmt: skip
    (tmp_path / "update.json").write_text(json.dumps(doc))
    loaded = load_release(tmp_path / "update.json")
    assert isinstance(loaded.release, GradientUpdate) and loaded.release.batch_size == 4
    assert loaded.dp_sgd is not None and loaded.dp_sgd.noise_multiplier == 1.0
    assert len(loaded.files) == 2


def test_header_starting_with_0x80_is_safetensors_not_a_pickle(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"  # no telling suffix: the content decides
    raw_safetensors(path, {"w": tensor_entry([2], 0)}, struct.pack("<2f", 1.0, 2.0), pad_to=128)
    assert path.read_bytes()[:1] == b"\x80" and sniff(path) == "safetensors"
    torch.testing.assert_close(read_tensor_file(path)["w"], torch.tensor([1.0, 2.0]))


def _err(exc: pytest.ExceptionInfo[ReleaseFileError], file: Path, field: str) -> None:
    assert exc.value.file == str(file) and exc.value.field == field
    assert str(file) in str(exc.value) and field in str(exc.value)


@pytest.mark.parametrize(
    ("content", "field", "words"),
    [
        (b"\x10\x00\x00", "header length", "truncated"),
        (struct.pack("<Q", 4096) + b'{"w": {}}', "header length", "says 4096 bytes"),
        (struct.pack("<Q", 6) + b'{"w": ', "header", "not valid JSON"),
    ],
    ids=["shorter-than-8-bytes", "length-exceeds-file", "malformed-header-json"],
)
def test_bad_safetensors_headers(tmp_path: Path, content: bytes, field: str, words: str) -> None:
    path = tmp_path / "weights.safetensors"
    path.write_bytes(content)
    with pytest.raises(MalformedFileError, match=words) as exc:
        read_tensor_file(path)
    _err(exc, path, field)


def test_offsets_beyond_the_data_and_truncated_data(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    raw_safetensors(path, {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8)
    with pytest.raises(MalformedFileError, match="beyond the 8 bytes") as exc:
        read_tensor_file(path)
    _err(exc, path, "w.data_offsets")
    full = tmp_path / "full.safetensors"
    save_file({"a": torch.ones(3), "b": torch.zeros(5)}, str(full))
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(full.read_bytes()[:-6])
    with pytest.raises(MalformedFileError, match="beyond") as exc:
        read_tensor_file(cut)
    _err(exc, cut, "b.data_offsets")


def test_lying_entries_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    raw_safetensors(path, {"w": tensor_entry([3], 0)}, b"\0" * 8)  # span 12 > 8 data bytes
    with pytest.raises(MalformedFileError, match="beyond"):
        read_tensor_file(path)
    raw_safetensors(path, {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8)
    with pytest.raises(MalformedFileError, match="needs 12") as exc:
        read_tensor_file(path)
    _err(exc, path, "w.data_offsets")
    two = {"a": tensor_entry([2], 0), "b": tensor_entry([2], 4)}  # overlapping spans
    raw_safetensors(path, two, b"\0" * 12)
    with pytest.raises(MalformedFileError, match="overlaps"):
        read_tensor_file(path)
    raw_safetensors(path, {"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}, b"\0")
    with pytest.raises(MalformedFileError, match="unknown dtype") as exc:
        read_tensor_file(path)
    _err(exc, path, "w.dtype")


def test_nan_and_inf_weights_name_the_tensor(tmp_path: Path) -> None:
    w = weights()
    w["layers.1.weight"][0, 2] = float("nan")
    write_checkpoint(tmp_path, w)
    with pytest.raises(NonFiniteWeightsError, match="1 NaN and 0 infinite") as exc:
        load_release(tmp_path)
    _err(exc, tmp_path / "weights.safetensors", "layers.1.weight")


def test_pickles_are_refused_even_when_named_like_weights(tmp_path: Path) -> None:
    evil = tmp_path / "model.pt"
    evil.write_bytes(pickle.dumps({"w": 1.0}, protocol=2))
    write_checkpoint(tmp_path, weights(), weights="model.pt")
    with pytest.raises(UnsafeFileError, match="pickle"):
        load_release(tmp_path)
    disguised = tmp_path / "weights.safetensors"
    disguised.write_bytes(pickle.dumps({"w": 1.0}))
    with pytest.raises(MalformedFileError, match="header length"):
        read_tensor_file(disguised)  # read as a (lying) safetensors header, never unpickled


def test_spec_width_mismatch_names_tensor_and_widths(tmp_path: Path) -> None:
    kwargs = {**SPEC.kwargs, "hidden": [16]}
    write_checkpoint(tmp_path, weights(), architecture={"kind": SPEC.kind, "kwargs": kwargs})
    with pytest.raises(SpecMismatchError, match=r"hidden widths \[8\]") as exc:
        load_release(tmp_path)
    _err(exc, tmp_path / "weights.safetensors", "layers.0.weight")
    assert "expects (16, 16)" in str(exc.value)


def test_spec_missing_and_extra_tensors(tmp_path: Path) -> None:
    w = weights()
    del w["layers.0.bias"]
    write_checkpoint(tmp_path / "a", w)
    with pytest.raises(SpecMismatchError, match="missing") as exc:
        load_release(tmp_path / "a")
    _err(exc, tmp_path / "a" / "weights.safetensors", "layers.0.bias")
    write_checkpoint(tmp_path / "b", {**weights(), "head.weight": torch.ones(2)})
    with pytest.raises(SpecMismatchError, match="not a tensor of architecture") as exc:
        load_release(tmp_path / "b")
    _err(exc, tmp_path / "b" / "weights.safetensors", "head.weight")


def test_dtype_mismatches(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "a", weights(), dtype="float64")
    with pytest.raises(SpecMismatchError, match="declares torch.float64"):
        load_release(tmp_path / "a")
    mixed = weights()
    mixed["layers.1.weight"] = mixed["layers.1.weight"].double()
    write_checkpoint(tmp_path / "b", mixed)
    with pytest.raises(SpecMismatchError, match="one dtype") as exc:
        load_release(tmp_path / "b")
    assert exc.value.field == "layers.1.weight"
    ints = weights()
    ints["layers.0.bias"] = torch.zeros(8, dtype=torch.int64)
    write_checkpoint(tmp_path / "c", ints)
    with pytest.raises(SpecMismatchError, match="floating point"):
        load_release(tmp_path / "c")


def test_malformed_spec_json_names_line(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, weights())
    (tmp_path / "release.json").write_text('{"type": "checkpoint",\n "weights": }')
    with pytest.raises(MalformedFileError, match="malformed JSON at line 2") as exc:
        load_release(tmp_path)
    assert exc.value.file == str(tmp_path / "release.json")


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        ({"wieghts": "x"}, "wieghts", "unknown field"),
        (
            {"training": {"loss": "logistic", "steps": "100", "n_train": 8}},
            "training.steps",
            "valid integer",
        ),
        (
            {"training": {"loss": "logistic", "steps": 1, "n_train": 8, "lr": 1}},
            "training.lr",
            "unknown field",
        ),
        (
            {"dp_sgd": {"sampling_rate": 2.0, "noise_multiplier": 1.0, "steps": 1}},
            "dp_sgd.sampling_rate",
            "less than or equal to 1",
        ),
        ({"type": "model"}, "type", "one of"),
        ({"architecture": {"kind": "resnet9000"}}, "architecture.kind", "unknown"),
        (
            {"architecture": {"kind": "mlp", "kwargs": {"widths": 3}}},
            "architecture.kwargs",
            "widths",
        ),
    ],
    ids=["typo", "string-int", "unknown-nested", "out-of-range", "type", "kind", "kwargs"],
)
def test_unknown_or_mistyped_metadata(
    tmp_path: Path, override: dict[str, object], field: str, words: str
) -> None:
    write_checkpoint(tmp_path, weights(), **override)
    with pytest.raises(MetadataError, match=words) as exc:
        load_release(tmp_path)
    _err(exc, tmp_path / "release.json", field)


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="release.json"):
        load_release(tmp_path)
    write_checkpoint(tmp_path, weights(), weights="gone.safetensors")
    with pytest.raises(DataNotFoundError, match="gone.safetensors"):
        load_release(tmp_path)


def test_knowledge_file_loads_with_tensors(tmp_path: Path) -> None:
    save_file({"x": torch.rand(5, 1, 4, 4)}, str(tmp_path / "prior.safetensors"))
    save_file({"x": torch.rand(3, 16), "y": torch.tensor([0, 1, 0])}, str(tmp_path / "o.st"))
    (tmp_path / "k.yaml").write_text(
        "input_shape: [1, 4, 4]\nvalue_range: [-1, 1]\nlabel_set: [0, 1]\nn_records: 8\n"
        "prior: prior.safetensors\nother_records: {file: o.st}\nlabels: [1, 0]\n"
    )
    k = load_knowledge(tmp_path / "k.yaml")
    assert k.input_shape == (1, 4, 4) and k.value_range == (-1.0, 1.0) and k.n_records == 8
    assert k.prior is not None and tuple(k.prior.shape) == (5, 1, 4, 4)
    assert k.other_records is not None and tuple(k.other_records[0].shape) == (3, 1, 4, 4)
    assert k.labels is not None and k.labels.tolist() == [1, 0]
    (tmp_path / "k.json").write_text(json.dumps({"input_shape": [16], "active": True}))
    assert load_knowledge(tmp_path / "k.json").active


@pytest.mark.parametrize(
    ("text", "error", "field", "words"),
    [
        (
            "input_shape: [1, 4, 4]\nvalue_rnage: [0, 1]\n",
            MetadataError,
            "value_rnage",
            "unknown field",
        ),
        ("n_records: '100'\n", MetadataError, "n_records", "valid integer"),
        ("value_range: [1, 0]\n", MetadataError, "value_range", "low < high"),
        (
            "input_shape: [1, 8, 8]\nprior: prior.safetensors\n",
            MetadataError,
            "prior",
            "input_shape",
        ),
        ("input_shape: [1, 4\n", MalformedFileError, "", "malformed YAML"),
        ("- 1\n- 2\n", MalformedFileError, "", "mapping"),
    ],
    ids=["typo", "mistyped", "empty-range", "prior-shape", "yaml", "not-a-mapping"],
)
def test_bad_knowledge_files(
    tmp_path: Path, text: str, error: type[ReleaseFileError], field: str, words: str
) -> None:
    save_file({"x": torch.rand(5, 1, 4, 4)}, str(tmp_path / "prior.safetensors"))
    (tmp_path / "k.yaml").write_text(text)
    with pytest.raises(error, match=words) as exc:
        load_knowledge(tmp_path / "k.yaml")
    _err(exc, tmp_path / "k.yaml", field)


def test_knowledge_prior_with_nan_is_refused(tmp_path: Path) -> None:
    prior = torch.rand(4, 16)
    prior[1, 3] = float("inf")
    save_file({"x": prior}, str(tmp_path / "prior.safetensors"))
    (tmp_path / "k.json").write_text(json.dumps({"prior": "prior.safetensors"}))
    with pytest.raises(NonFiniteWeightsError) as exc:
        load_knowledge(tmp_path / "k.json")
    _err(exc, tmp_path / "prior.safetensors", "x")


@functools.cache
def _valid_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "w.safetensors"
        tensors = {"a": torch.arange(6.0).reshape(2, 3), "b": torch.ones(4, dtype=torch.float64)}
        save_file(tensors, str(path))
        return path.read_bytes()


@settings(max_examples=150, deadline=None)
@example(cut=0, flips=[(64, 32)])  # renames tensor "a" to " ": loads, and must be accepted
@given(
    cut=st.integers(min_value=0, max_value=200),
    flips=st.lists(st.tuples(st.integers(0, 199), st.integers(0, 255)), max_size=4),
)
def test_damaged_safetensors_only_raise_documented_errors(
    cut: int, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(_valid_bytes()[: max(cut, 0) or None])
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "w.safetensors"
        path.write_bytes(bytes(data))
        try:
            tensors = read_tensor_file(path)
        except TrainleakError:
            return
        # A flip inside a name can rename a tensor (" " for "a") and the file still loads;
        # in-place flips cannot add header entries, so a loaded file holds at most two tensors.
        assert len(tensors) <= 2
        assert all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items())


def test_language_model_spec_without_the_text_extra_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installation without the ``text`` extra: the spec loader says which extra to install,
    naming the spec file, and ``trainleak assess`` stops with exit code 2 before any attack."""
    why = "a released language model needs transformers, which is not installed: "
    why += "pip install 'trainleak[text]'"
    monkeypatch.setattr(io, "_TEXT", None)
    monkeypatch.setattr(io, "TEXT_ERROR", why)
    spec = tmp_path / "release.json"
    spec.write_text(json.dumps({"type": "language_model", "model": "target"}))
    with pytest.raises(MissingExtraError, match=r"release\.json.*pip install 'trainleak\[text\]'"):
        load_release(spec)
    res = CliRunner().invoke(
        cli.app, ["assess", "--release", str(spec), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2, res.output
    assert "trainleak[text]" in res.output and not (tmp_path / "o" / "result.json").exists()
