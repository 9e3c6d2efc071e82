"""``trainleak attacks``, ``trainleak attack`` and ``trainleak assess`` end to end on a tiny
checkpoint saved the way a user's own code would save it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from release_fixtures import tiny_binary_checkpoint
from trainleak import cli
from trainleak.audit import ResultStore
from trainleak.cli_assess import parse_sets

runner = CliRunner()


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trained 16-16-1 homogeneous MLP as safetensors + spec, a knowledge file, and the 8
    training records as the reference set."""
    root = tmp_path_factory.mktemp("release")
    ckpt, _ = tiny_binary_checkpoint()
    theirs = {"0.weight": ckpt.final["layers.0.weight"], "2.weight": ckpt.final["layers.1.weight"]}
    save_file({k: v.contiguous() for k, v in theirs.items()}, str(root / "model.safetensors"))
    assert ckpt.initial is not None
    init = {
        "0.weight": ckpt.initial["layers.0.weight"],
        "2.weight": ckpt.initial["layers.1.weight"],
    }
    save_file({k: v.contiguous() for k, v in init.items()}, str(root / "init.safetensors"))
    spec = {
        "type": "checkpoint",
        "architecture": {"kind": "homogeneous_mlp", "kwargs": ckpt.architecture.kwargs},
        "weights": "model.safetensors",
        "initial_weights": "init.safetensors",
        "tensor_names": {"layers.0.weight": "0.weight", "layers.1.weight": "2.weight"},
        "training": {"loss": "logistic", "steps": 200, "n_train": 8},
    }
    (root / "release.json").write_text(json.dumps(spec))
    (root / "knowledge.yaml").write_text("value_range: [-1, 1]\nlabel_set: [0, 1]\n")
    x = torch.rand(8, 1, 4, 4, generator=torch.Generator().manual_seed(0)) * 2 - 1
    save_file({"x": x, "y": torch.arange(8) % 2}, str(root / "private.safetensors"))
    return root


def test_attacks_lists_what_applies_and_what_it_needs(release: Path) -> None:
    res = runner.invoke(cli.app, ["attacks", "--release", str(release / "release.json")])
    assert res.exit_code == 0, res.output
    for name in ("kkt", "init-final", "prototypes"):
        assert name in res.stdout
    assert "dlg" not in res.stdout  # gradient-update attacks do not apply to a checkpoint
    assert "missing ['value_range']" in res.stdout  # kkt, without a knowledge file
    k = ["--knowledge", str(release / "knowledge.yaml")]
    res = runner.invoke(cli.app, ["attacks", "--release", str(release), *k])
    assert res.exit_code == 0 and "missing" not in res.stdout


def test_attack_kkt_writes_result_and_report_with_card(release: Path, tmp_path: Path) -> None:
    out = tmp_path / "kkt"
    args = ["attack", "kkt", "--release", str(release), "-k", str(release / "knowledge.yaml")]
    res = runner.invoke(cli.app, [*args, "--set", "steps=40", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "REVIEW" in res.stdout and "16 candidate" in res.stdout  # 2 x n_train candidates
    doc = json.loads((out / "result.json").read_text())
    assert doc["risk"]["level"] == "review" and doc["risk"]["attack"]["attack"] == "kkt"
    assert doc["config"]["settings"] == {"kkt": {"steps": 40}}
    html = (out / "report.html").read_text()
    assert "Risk card" in html and "Not cleared: kkt produced 16 candidate" in html
    assert "images/kkt.png" in doc["artifacts"].values()  # the unverified candidates
    rows = ResultStore(tmp_path / "trainleak.sqlite").rows()
    assert [(r.experiment, r.status) for r in rows] == [("assess", "done")]
    # the same command again (a user rerunning it): a fresh folder beside the first, which is
    # left as it was; then with the first folder deleted, the freed name is taken again
    first = (out / "result.json").read_text()
    res = runner.invoke(cli.app, [*args, "--set", "steps=40", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "kkt-2" / "result.json").is_file() and "kkt-2" in res.stdout
    assert (out / "result.json").read_text() == first
    for f in sorted(out.rglob("*"), reverse=True):
        f.rmdir() if f.is_dir() else f.unlink()
    out.rmdir()
    res = runner.invoke(cli.app, [*args, "--set", "steps=40", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "result.json").is_file()
    rows = ResultStore(tmp_path / "trainleak.sqlite").rows()
    assert [r.status for r in rows] == ["done"] * 3
    # the freed folder is the third run's; the first run's row keeps its result, not the folder
    assert [r.out_dir for r in rows] == [None, str((tmp_path / "kkt-2").resolve()), str(out)]


def test_assess_with_reference_set_end_to_end(release: Path, tmp_path: Path) -> None:
    out = tmp_path / "all"
    sets = ["kkt.steps=40", "init-final.steps=20", "init-final-subspace.steps=20"]
    res = runner.invoke(
        cli.app,
        ["assess", "--release", str(release), "--knowledge", str(release / "knowledge.yaml"),
         "--private", str(release / "private.safetensors"), "--out", str(out),
         *[a for s in sets for a in ("--set", s)]],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "result.json").read_text())
    table = {row["attack"]: row for row in doc["tables"]["attacks"]}
    assert set(table) == {"kkt", "init-final", "init-final-subspace", "prototypes"}
    assert table["prototypes"]["status"] == "not applicable"
    assert all(table[n]["of"] == 8 for n in ("kkt", "init-final", "init-final-subspace"))
    risk = doc["risk"]
    assert risk["attacks_run"] == 3 and risk["bound"] is None  # no DP, no bound
    best = table[risk["attack"]["attack"]]
    if risk["level"] == "high":
        assert best["recovered"] > best["baseline recovered"]
    else:  # nothing beyond the baseline, and nothing proves the data safe
        assert risk["level"] == "unproven"
        assert all(table[n]["recovered"] <= table[n]["baseline recovered"] for n in table
                   if table[n]["status"] == "done")  # fmt: skip
    html = (out / "report.html").read_text()
    assert html.index("Risk card") < html.index("Table: attacks")
    assert risk["verdict"].split(":")[0] in html
    assert "images/kkt.png" in doc["artifacts"].values()


def test_bad_input_is_one_error_line_naming_the_file(release: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    spec = json.loads((release / "release.json").read_text())
    spec["weights"] = str(release / "model.safetensors")
    spec["optimiser"] = {"name": "gd"}  # misspelt key
    (bad / "release.json").write_text(json.dumps(spec))
    res = runner.invoke(cli.app, ["assess", "--release", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "error:" in res.stderr and "release.json: optimiser: unknown field" in res.stderr
    assert not (tmp_path / "o").exists()  # nothing was recorded or run
    res = runner.invoke(cli.app, ["assess", "-r", str(release), "--set", "steps=3", "-o", "x"])
    assert res.exit_code == 2 and "ATTACK.key=value" in res.stderr


def test_parse_sets() -> None:
    assert parse_sets(["kkt.steps=5", "kkt.lr_x=1e-3"], None) == {"kkt": {"steps": 5, "lr_x": 1e-3}}
    assert parse_sets(["steps=5"], "kkt") == {"kkt": {"steps": 5}}
