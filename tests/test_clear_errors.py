"""Inputs that used to end in a traceback now end in one clear error (issue 17).

Each test names the command that reproduced the traceback before the fix.
"""

from __future__ import annotations

import pickle
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from trainleak import cli
from trainleak.data._files import CorruptDataError
from trainleak.data.cifar import _read_py_batch
from trainleak.data.mnist import read_idx
from trainleak.errors import ConfigError, MissingExtraError
from trainleak.experiments import available_experiments, get_experiment
from trainleak.experiments import base as experiments_base
from trainleak.models import build_model, memory, model_spec

runner = CliRunner()


def _cli_error(tmp_path: Path, *args: str) -> str:
    """Run the CLI; it must fail with exit code 2, one error line and nothing recorded."""
    res = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "run")])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error:") and "Traceback" not in res.output
    assert not (tmp_path / "trainleak.sqlite").exists() and not (tmp_path / "run").exists()
    return " ".join(res.stderr.split())


@pytest.mark.parametrize(
    ("value", "field"),
    [("trials=0", "'trials'"), ("trials=-5", "'trials'"), ("dims=[]", "'dims'")],
)
def test_zcdp_transition_bad_sweeps(tmp_path: Path, value: str, field: str) -> None:
    """Before: `trainleak run zcdp-transition --set trials=0` -> ValueError: not enough values
    to unpack; `--set dims=[]` ran and decided claims over no dimension."""
    assert field in _cli_error(tmp_path, "run", "zcdp-transition", "--set", value)


def test_seed_that_overflows(tmp_path: Path) -> None:
    """Before: `trainleak run deletion-reconstruction --set seed=99999999999999999999999`
    -> ValueError: Overflow when unpacking long long."""
    text = _cli_error(
        tmp_path, "run", "deletion-reconstruction", "--set", "seed=99999999999999999999999"
    )
    assert "'seed'" in text and "2147483647" in text
    assert "'seed'" in _cli_error(tmp_path, "run", "deletion-reconstruction", "--set", "seed=-1")


def test_empty_sweeps_are_config_errors_in_every_experiment() -> None:
    """Before: `--set deletions=[]` -> ValueError: max() arg is an empty sequence."""
    for name, exp in available_experiments().items():
        if name.startswith("_"):
            continue
        defaults = exp.make_config({})  # the defaults themselves are valid
        for field, info in type(defaults).model_fields.items():
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            default = getattr(defaults, field)
            if isinstance(default, list) and default and not extra.get("empty_ok"):
                with pytest.raises(ConfigError, match=f"'{field}'"):
                    exp.make_config({field: []})


def test_model_too_large_is_refused_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `trainleak run kkt-reconstruction --set 'hidden=[1000000,1000000]'` tried to
    allocate 4 TB (RuntimeError / the kernel's OOM killer)."""
    huge = model_spec("mlp", input_shape=(784,), hidden=[10**6, 10**6], out_dim=10)
    with pytest.raises(ConfigError, match=r"1,000,796,000,010 parameters.*choose smaller"):
        build_model(huge)
    small = model_spec("mlp", input_shape=(784,), hidden=[100], out_dim=10)
    assert sum(p.numel() for p in build_model(small).parameters()) == 79_510
    monkeypatch.setattr(memory, "available_memory", lambda: 79_510 * 16 - 1)
    with pytest.raises(ConfigError, match="79,510 parameters"):
        build_model(small)
    monkeypatch.setattr(memory, "available_memory", lambda: 79_510 * 16)
    build_model(small)
    with pytest.raises(ConfigError, match="architecture 'mlp'"):
        build_model(model_spec("mlp", input_shape=(4,), hidden=[2], out_dim=2, nope=1))


def test_missing_extra_is_marked_and_names_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: without opacus, `trainleak run dpsgd-distortion-bound` failed mid-run after
    recording a row; `trainleak list` did not say that it needs an extra."""
    real = experiments_base._installed
    monkeypatch.setattr(experiments_base, "_installed", lambda m: m != "opacus" and real(m))
    # a wide terminal, so the table does not wrap the install line across cell rows
    listed = runner.invoke(cli.app, ["list"], env={"COLUMNS": "240"})
    assert listed.exit_code == 0
    # the table may wrap the hint across rows: read the cells without the column borders
    cells = " ".join(listed.stdout.replace("│", " ").split())
    assert cells.count("pip install 'trainleak[dp]'") == 1
    text = _cli_error(tmp_path, "run", "dpsgd-distortion-bound")
    assert text.endswith("pip install 'trainleak[dp]'")
    with pytest.raises(MissingExtraError):
        get_experiment("dpsgd-distortion-bound").check_extras()
    assert get_experiment("zcdp-transition").missing_extras() == []


CIFAR_WRONG_TYPES: dict[str, Any] = {
    "array of names": np.array(["data", "labels"]),  # before: IndexError
    "list": [1, 2],
    "int": 5,
    "bytes": b"xx data xx",
    "data as list": {b"data": [1, 2], b"labels": [1]},
    "labels as text": {b"data": np.zeros((1, 3072), np.uint8), b"labels": "a"},
    "nested labels": {b"data": np.zeros((2, 3072), np.uint8), b"labels": [[1], [2]]},
    "huge label": {b"data": np.zeros((1, 3072), np.uint8), b"labels": [2**70]},
}


@pytest.mark.parametrize("case", sorted(CIFAR_WRONG_TYPES))
def test_cifar_batch_of_the_wrong_type(tmp_path: Path, case: str) -> None:
    """Before: a batch that unpickles to an array of strings -> IndexError."""
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps(CIFAR_WRONG_TYPES[case], protocol=2))
    with pytest.raises(CorruptDataError, match="data_batch_1"):
        _read_py_batch(path)


def test_idx_header_whose_dimensions_overflow(tmp_path: Path) -> None:
    """Before: dimensions 65536^4 multiply to 0 in int64, the size check passed and the
    reshape raised ValueError."""
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(struct.pack(">I4I", 0x0804, 65536, 65536, 65536, 65536))
    with pytest.raises(CorruptDataError, match="18446744073709551636"):
        read_idx(path, 4)
