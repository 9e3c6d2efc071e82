"""Assessing a user's own split-learning transcript (what the server recorded) end to end
through ``trainleak assess``: undefended, the server's attacks recover the clients' MNIST images
beyond public images at equal budget (high risk); under heavy DP noise on the smashed data they
do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import save_file

from assess_helpers import assess_cli
from trainleak.defenses.split_learning import KDUFSL
from trainleak.errors import MetadataError
from trainleak.releases.io import load_release
from trainleak.releases.split_learning import SmashedDefenseSpec
from trainleak.scenarios.split_learning import split_task
from trainleak.systems.split_learning.ufsl import UFSLConfig, train_ufsl

QUICK = ["split-inverse-network.steps=150", "split-fora.steps=150",
         "split-fora.substitute_steps=150", "split-whitebox.steps=150"]  # fmt: skip


def _saved(tmp: Path, data_dir: Path, defense: SmashedDefenseSpec | None) -> Path:
    """Train a small MNIST split under ``defense``, save its first 64 transcript rows, the
    public images as a knowledge file and the rows' private images as the reference set."""
    task = split_task("mnist", 2, 100, 300, 50, seed=0)
    run = train_ufsl(
        task.clients,
        task.split,
        UFSLConfig(rounds=3, batch_size=32),
        defense=None if defense is None else KDUFSL(defense),
        seed=0,
    )
    tr, keep = run.transcript.first_rows(64)
    tr.save(tmp / "transcript")
    save_file({"x": task.aux.contiguous()}, str(tmp / "public.safetensors"))
    (tmp / "knowledge.yaml").write_text("prior: public.safetensors\nvalue_range: [0.0, 1.0]\n")
    truth = task.private_x[run.row_index[keep]]
    save_file({"x": truth.contiguous()}, str(tmp / "private.safetensors"))
    return tmp


def _assess(tmp: Path) -> tuple[dict[str, dict[str, object]], dict[str, object]]:
    table, doc = assess_cli(
        tmp / "transcript", tmp / "knowledge.yaml", tmp / "private.safetensors",
        tmp / "assessment", QUICK,
    )  # fmt: skip
    return table, doc["risk"]


def test_undefended_transcript_is_high_risk(data_dir: Path, tmp_path: Path) -> None:
    tmp = _saved(tmp_path, data_dir, None)
    loaded = load_release(tmp / "transcript")
    assert loaded.kind == "split_transcript" and len(loaded.release) == 64  # type: ignore[arg-type]
    table, risk = _assess(tmp)
    assert {"split-inverse-network", "split-fora", "split-whitebox"} <= set(table)
    white = table["split-whitebox"]
    assert white["status"] == "done" and white["of"] == 64
    assert risk["level"] == "high"
    # Inverting the known head recovers most rows, far beyond 64 public images.
    assert white["recovered"] >= 48 and white["recovered"] >= white["baseline recovered"] + 16


def test_noised_transcript_is_not_high_risk(data_dir: Path, tmp_path: Path) -> None:
    spec = SmashedDefenseSpec(sigma=0.5, clip=8.0)
    table, risk = _assess(_saved(tmp_path, data_dir, spec))
    done = [r for r in table.values() if r["status"] == "done"]
    assert len(done) == 3
    assert risk["level"] != "high"
    assert all(r["recovered"] <= r["baseline recovered"] for r in done)  # type: ignore[operator]


def test_a_text_transcript_folder_is_refused_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "transcript.json").write_text(
        json.dumps({"format": "trainleak.text_split_transcript/1"})
    )
    with pytest.raises(MetadataError, match="split-llm-mixguard"):
        load_release(folder)
