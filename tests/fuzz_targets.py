"""Fuzz targets: every parser of user input, fed by hypothesis; only trainleak's own errors
(:class:`~trainleak.errors.TrainleakError` subclasses) may escape.

Each target is a hypothesis strategy and a function that feeds one drawn example to the
parser; :func:`fuzz_runner.run_target` runs one. Used by ``tests/test_fuzz.py`` (a few hundred
cases in the default suite) and by ``benchmarks/fuzz.py`` (``make fuzz``: at least 10,000
cases, results in ``benchmarks/results/fuzz.md``).
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import io
import json
import pickle
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from hypothesis import strategies as st
from PIL import Image
from safetensors.torch import save as save_safetensors

from trainleak.audit import expand_grid, load_grid
from trainleak.cli import parse_overrides
from trainleak.data.cifar import _read_py_batch, _read_sprite
from trainleak.data.mnist import read_idx
from trainleak.errors import TrainleakError
from trainleak.experiments import available_experiments, get_experiment
from trainleak.models import build_model, load_state_dict, model_spec
from trainleak.releases import Checkpoint, GradientUpdate

WORK = Path(tempfile.mkdtemp(prefix="trainleak-fuzz-"))
atexit.register(shutil.rmtree, WORK, ignore_errors=True)
EXPERIMENTS = sorted(n for n in available_experiments() if not n.startswith("_"))


def only_trainleak_errors(fn: Callable[[], Any]) -> None:
    """Run ``fn``; a TrainleakError is a fine answer to bad input, anything else escapes."""
    with contextlib.suppress(TrainleakError):
        fn()


# --- building blocks ------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@dataclass(frozen=True)
class Mutation:
    """Edits of a byte string: each ``(kind, where in [0, 1], payload)``."""

    edits: tuple[tuple[str, float, bytes], ...]

    def apply(self, data: bytes) -> bytes:
        out = bytearray(data)
        for kind, where, payload in self.edits:
            i = int(where * len(out))
            if kind == "flip" and out:
                out[min(i, len(out) - 1)] ^= payload[0] if payload else 0xFF
            elif kind == "cut":
                del out[i:]
            elif kind == "insert":
                out[i:i] = payload
            elif kind == "replace":
                out[i : i + len(payload)] = payload
        return bytes(out)


mutations = st.builds(
    Mutation,
    st.lists(
        st.tuples(
            st.sampled_from(["flip", "cut", "insert", "replace"]),
            st.floats(0, 1),
            st.binary(min_size=1, max_size=16),
        ),
        min_size=1,
        max_size=4,
    ).map(tuple),
)


def mutated(valid: bytes) -> st.SearchStrategy[bytes]:
    """Bytes near ``valid`` (a few edits), or arbitrary bytes."""
    return st.one_of(mutations.map(lambda m: m.apply(valid)), st.binary(max_size=256))


def _file(name: str, data: bytes) -> Path:
    path = WORK / name
    path.write_bytes(data)
    return path


# --- configs, --set values and grid files -----------------------------------------------------


def _fields(name: str) -> list[str]:
    return sorted(get_experiment(name).config_type.model_fields)


configs = st.sampled_from(EXPERIMENTS).flatmap(
    lambda name: st.tuples(
        st.just(name),
        st.dictionaries(
            st.one_of(st.sampled_from(_fields(name)), st.text(max_size=8)), json_values, max_size=4
        ),
    )
)


def check_config(case: tuple[str, dict[str, Any]]) -> None:
    name, overrides = case
    only_trainleak_errors(lambda: get_experiment(name).make_config(overrides))


set_values = st.tuples(
    st.sampled_from(EXPERIMENTS),
    st.lists(
        st.one_of(
            st.text(max_size=30),
            st.tuples(st.text(max_size=10), st.text(max_size=30)).map(lambda kv: "=".join(kv)),
            st.tuples(st.sampled_from(["seed", "trials", "dims", "epsilons"]), scalars).map(
                lambda kv: f"{kv[0]}={kv[1]}"
            ),
        ),
        max_size=4,
    ),
)


def check_set_values(case: tuple[str, list[str]]) -> None:
    name, pairs = case
    only_trainleak_errors(lambda: get_experiment(name).make_config(parse_overrides(pairs)))


grid_docs = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.fixed_dictionaries(
        {},
        optional={
            "experiment": st.one_of(st.sampled_from(EXPERIMENTS), json_values),
            "grid": st.one_of(
                st.dictionaries(
                    st.text(max_size=8), st.lists(json_values, min_size=0, max_size=3), max_size=2
                ),
                json_values,
            ),
            "set": st.one_of(st.dictionaries(st.text(max_size=8), json_values), json_values),
            "extra": json_values,
        },
    ).map(lambda d: yaml.safe_dump(d).encode()),
)


def check_grid(doc: bytes) -> None:
    path = _file("grid.yaml", doc)

    def parse() -> None:
        for spec in load_grid(path):
            expand_grid(spec, WORK / "grid-out")

    only_trainleak_errors(parse)


# --- data loaders -----------------------------------------------------------------------------


def _idx(shape: tuple[int, ...]) -> bytes:
    header = struct.pack(">I", 0x0800 | len(shape)) + struct.pack(f">{len(shape)}I", *shape)
    return header + bytes(int(np.prod(shape)))


idx_files = st.tuples(
    st.sampled_from([1, 3]),
    st.booleans(),
    st.one_of(mutated(_idx((2, 3, 3))), mutated(_idx((5,)))),
)


def check_idx(case: tuple[int, bool, bytes]) -> None:
    ndim, gz, data = case
    path = _file("x-idx.gz" if gz else "x-idx", gzip.compress(data) if gz else data)
    only_trainleak_errors(lambda: read_idx(path, ndim))


def _png(size: tuple[int, int] = (1024, 1000)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size).save(buf, format="PNG")
    return buf.getvalue()


cifar_pngs = st.one_of(mutated(_png()), mutated(_png((4, 4))))


def check_cifar_png(data: bytes) -> None:
    path = _file("cifar10_batch_0.png", data)
    only_trainleak_errors(lambda: _read_sprite(path))


def _batch(n: int = 2) -> dict[bytes, Any]:
    return {b"data": np.zeros((n, 3072), np.uint8), b"labels": list(range(n))}


arrays = st.builds(
    lambda shape, dtype: np.zeros(shape, dtype),
    st.lists(st.integers(0, 4), max_size=3).map(tuple),
    st.sampled_from([np.uint8, np.int64, np.float32, np.bool_]),
)
cifar_batches = st.one_of(
    mutated(pickle.dumps(_batch(), protocol=2)),
    mutated(pickle.dumps(_batch(), protocol=5)),
    st.recursive(
        st.one_of(scalars, arrays, st.binary(max_size=8)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from([b"data", b"labels", "data", "x"]), inner, max_size=3),
        ),
        max_leaves=6,
    ).map(lambda obj: pickle.dumps(obj, protocol=2)),
)


def check_cifar_batch(data: bytes) -> None:
    path = _file("data_batch_1", data)
    only_trainleak_errors(lambda: _read_py_batch(path))


# --- checkpoints, state dicts and updates ---------------------------------------------------

_SPEC = model_spec("mlp", input_shape=(3,), hidden=[2], out_dim=2)
_STATE = {k: v.detach() for k, v in build_model(_SPEC, seed=0).state_dict().items()}
_CKPT_DIR = Checkpoint(_SPEC, _STATE, initial={k: v.clone() for k, v in _STATE.items()}).save(
    WORK / "ckpt-valid"
)
_UPDATE_DIR = GradientUpdate(_SPEC, _STATE, {k: v + 1 for k, v in _STATE.items()}).save(
    WORK / "update-valid"
)


def _torch_bytes() -> bytes:
    buf = io.BytesIO()
    torch.save(_STATE, buf)
    return buf.getvalue()


def _header_lie(entries: list[tuple[str, str, list[int], int, int]], tail: bytes) -> bytes:
    header = {
        name: {"dtype": dtype, "shape": shape, "data_offsets": [start, end]}
        for name, dtype, shape, start, end in entries
    }
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + tail


lying_safetensors = st.builds(
    _header_lie,
    st.lists(
        st.tuples(
            st.sampled_from(["layers.0.weight", "w", ""]),
            st.sampled_from(["F32", "F64", "I64", "BOOL", "F16", "XX"]),
            st.lists(st.integers(-2, 2**40), max_size=3),
            st.integers(-2, 2**40),
            st.integers(-2, 2**40),
        ),
        max_size=3,
    ),
    st.binary(max_size=64),
)
state_files = st.tuples(
    st.sampled_from([".safetensors", ".pt", ".bin"]),
    st.one_of(
        mutated(save_safetensors(_STATE)), mutated(_torch_bytes()), lying_safetensors, json_values
    ),
)


def check_state_dict(case: tuple[str, Any]) -> None:
    suffix, data = case
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    path = _file(f"weights{suffix}", raw)
    only_trainleak_errors(lambda: load_state_dict(path))


def _release_files(folder: Path, weights: str) -> st.SearchStrategy[tuple[bytes, bytes]]:
    valid_meta = (folder / "release.json").read_bytes()
    meta = st.one_of(
        mutated(valid_meta),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.dictionaries(
            st.sampled_from(["architecture", "optimizer", "training", "kind", "batch_size"]),
            json_values,
        ).map(lambda v: json.dumps(v).encode()),
        st.just(valid_meta),
    )
    tensors = st.one_of(mutated((folder / weights).read_bytes()), lying_safetensors)
    return st.tuples(tensors, meta)


checkpoint_dirs = _release_files(_CKPT_DIR, "weights.safetensors")
update_dirs = _release_files(_UPDATE_DIR, "update.safetensors")


def _release_dir(name: str, weights: str, case: tuple[bytes, bytes]) -> Path:
    folder = WORK / name
    folder.mkdir(exist_ok=True)
    (folder / weights).write_bytes(case[0])
    (folder / "release.json").write_bytes(case[1])
    return folder


def check_checkpoint(case: tuple[bytes, bytes]) -> None:
    folder = _release_dir("ckpt", "weights.safetensors", case)
    only_trainleak_errors(lambda: Checkpoint.load(folder))


def check_update(case: tuple[bytes, bytes]) -> None:
    folder = _release_dir("update", "update.safetensors", case)
    only_trainleak_errors(lambda: GradientUpdate.load(folder))


TARGETS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], None]]] = {
    "experiment config": (configs, check_config),
    "--set values": (set_values, check_set_values),
    "grid file": (grid_docs, check_grid),
    "IDX file": (idx_files, check_idx),
    "CIFAR-10 PNG sprite": (cifar_pngs, check_cifar_png),
    "CIFAR-10 python batch": (cifar_batches, check_cifar_batch),
    "state dict file": (state_files, check_state_dict),
    "checkpoint folder": (checkpoint_dirs, check_checkpoint),
    "gradient-update folder": (update_dirs, check_update),
}
