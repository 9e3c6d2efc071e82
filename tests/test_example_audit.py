"""The README's worked example stays runnable: plain-PyTorch training script, then ``assess``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from typer.testing import CliRunner

from trainleak import cli
from trainleak.releases import Checkpoint, load_release

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_digits_mlp.py"


def test_example_checkpoint_loads_and_assesses(tmp_path: Path) -> None:
    out = tmp_path / "own-model"
    spec = importlib.util.spec_from_file_location("train_digits_mlp", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    x, y, public = example.data(per_class=3)
    model = example.train(x, y, steps=20, lr=0.5)
    example.save(model, x, y, public, out, steps=20, lr=0.5)
    source = (EXAMPLE.read_text()).split('"""', 2)[2]
    assert "import trainleak" not in source and "from trainleak" not in source
    loaded = load_release(out / "release.json")
    assert isinstance(loaded.release, Checkpoint) and loaded.release.training is not None
    assert loaded.release.training.n_train == 6
    res = CliRunner().invoke(
        cli.app,
        ["assess", "-r", str(out / "release.json"), "-k", str(out / "knowledge.yaml"),
         "--private", str(out / "private.safetensors"), "--only", "kkt",
         "--set", "kkt.steps=5", "-o", str(out / "assessment")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "assessment" / "result.json").read_text())
    attack = doc["risk"]["attack"]
    assert attack["attack"] == "kkt" and attack["of"] == 6 and attack["candidates"] == 12
    assert attack["baseline_recovered"] is not None  # the public digits give the baseline
