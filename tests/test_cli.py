"""Tests of the ``trainleak`` command line, on a tiny experiment registered here."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import Field
from typer.testing import CliRunner

from trainleak import cli
from trainleak.audit import ResultStore
from trainleak.experiments.base import ExperimentConfig, Result, experiment
from trainleak.progress import Progress, report_every

NAME = "_test-echo-cli"
runner = CliRunner()


class EchoConfig(ExperimentConfig):
    """Config of the test experiment."""

    value: float = 1.0
    steps: int = Field(2, ge=1)
    tags: list[int] = Field(default_factory=list)
    fail: bool = False
    sigterm: bool = False


@experiment(NAME, "Echo a value back (CLI test only).", EchoConfig)
def echo(cfg: EchoConfig, progress: Progress | None) -> Result:
    """Report progress, optionally fail, return a metric, a claim and an image."""
    for i in range(1, cfg.steps + 1):
        report_every(progress, "echo", i, cfg.steps, k=1)
    if cfg.fail:
        raise RuntimeError("echo failed on purpose")
    if cfg.sigterm:
        os.kill(os.getpid(), signal.SIGTERM)  # as if `kill PID` arrived mid-run
    result = Result(experiment=NAME, config=cfg.model_dump())
    result.metrics = {"value": cfg.value, "n_tags": len(cfg.tags)}
    result.claim("the value is positive", cfg.value > 0, value=cfg.value)
    result.images["grid"] = np.eye(8)
    return result


def test_list_shows_experiments_and_attacks() -> None:
    res = runner.invoke(cli.app, ["list"])
    assert res.exit_code == 0, res.output
    assert NAME in res.stdout and "Echo a value back" in res.stdout
    assert "Experiments" in res.stdout and "Attacks" in res.stdout


def test_run_prints_metrics_and_claims(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "r1"
    res = runner.invoke(
        cli.app, ["run", NAME, "--set", "value=1e-3", "-s", "tags=[1, 2]", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "the value is positive" in res.stdout and "holds" in res.stdout
    doc = json.loads((out / "result.json").read_text())
    assert doc["metrics"] == {"value": 0.001, "n_tags": 2}
    (row,) = ResultStore(tmp_path / "runs" / "trainleak.sqlite").rows()
    assert row.status == "done"


def test_run_json_prints_only_the_result_json(tmp_path: Path) -> None:
    store = tmp_path / "elsewhere.sqlite"
    res = runner.invoke(
        cli.app,
        ["run", NAME, "--set", "value=-2", "--out", str(tmp_path / "r"), "--json"]
        + ["--store", str(store)],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["experiment"] == NAME and doc["metrics"]["value"] == -2.0
    assert doc["claims"][0]["holds"] is False
    assert ResultStore(store).rows()[0].status == "done"


def test_bad_set_value_exits_2_naming_the_field(tmp_path: Path) -> None:
    res = runner.invoke(cli.app, ["run", NAME, "--set", "steps=many", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "error:" in res.stderr and "'steps'" in res.stderr and "'many'" in res.stderr
    assert "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1
    res = runner.invoke(cli.app, ["run", NAME, "--set", "steps", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "'--set'" in res.stderr and "key=value" in res.stderr
    res = runner.invoke(cli.app, ["run", NAME, "--set", "colour=red", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown config field 'colour'" in res.stderr


def test_unknown_experiment_is_a_clear_error(tmp_path: Path) -> None:
    res = runner.invoke(cli.app, ["run", "no-such-thing", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "'experiment'" in res.stderr and "no-such-thing" in res.stderr
    assert NAME in res.stderr  # the message lists the known experiments


def test_failing_run_is_recorded_as_failed(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "bad"
    res = runner.invoke(cli.app, ["run", NAME, "--set", "fail=true", "--out", str(out)])
    assert res.exit_code == 1 and isinstance(res.exception, RuntimeError)
    (row,) = ResultStore(tmp_path / "runs" / "trainleak.sqlite").rows()
    assert row.status == "failed" and "echo failed on purpose" in (row.error or "")


def test_report_renders_store_and_default_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(cli.app, ["report"])
    assert res.exit_code == 2 and "runs/trainleak.sqlite" in res.stderr
    assert runner.invoke(cli.app, ["run", NAME, "--out", "runs/a"]).exit_code == 0
    res = runner.invoke(cli.app, ["report", "--out", "page.html"])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "page.html").read_text()
    assert "the value is positive" in html and "<img" in html
    res = runner.invoke(cli.app, ["report", "runs/a", "nowhere", "--out", "p2.html"])
    assert res.exit_code == 2 and "nowhere" in res.stderr


def test_demo_runs_the_demo_experiment_and_writes_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "DEMO_EXPERIMENT", NAME)
    res = runner.invoke(cli.app, ["demo", "--out", str(tmp_path / "demo")])
    assert res.exit_code == 0, res.output
    report = tmp_path / "demo" / "report.html"
    assert report.is_file() and str(report) in res.stdout.replace("\n", "")
    assert "the value is positive" in report.read_text()


def test_audit_runs_grid_and_skips_done_points(tmp_path: Path) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"experiment: {NAME}\ngrid:\n  value: [1, 2]\nset:\n  steps: 1\n")
    args = ["audit", str(grid), "--out", str(tmp_path / "audit")]
    first = runner.invoke(cli.app, args)
    assert first.exit_code == 0, first.output
    assert first.stdout.count("done") == 2
    second = runner.invoke(cli.app, args)
    assert second.exit_code == 0 and second.stdout.count("skipped") == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"experiment: {NAME}\ngrid:\n  steps: [0]\n")
    res = runner.invoke(cli.app, ["audit", str(bad), "--out", str(tmp_path / "audit")])
    assert res.exit_code == 2 and "'steps'" in res.stderr


def test_audit_ray_backend_without_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"experiment: {NAME}\n")
    res = runner.invoke(cli.app, ["audit", str(grid), "--backend", "ray"])
    assert res.exit_code == 2
    assert "pip install 'trainleak[distributed]'" in res.stderr


def test_parse_overrides_reads_yaml_values() -> None:
    assert cli.parse_overrides(["a=1e-3", "b=true", "c=[1, 2]", "d=text", "e=x=y"]) == {
        "a": 0.001,
        "b": True,
        "c": [1, 2],
        "d": "text",
        "e": "x=y",
    }


def test_second_run_with_the_same_out_goes_to_a_fresh_folder(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "same"
    first = runner.invoke(cli.app, ["run", NAME, "--set", "value=1", "--out", str(out)])
    assert first.exit_code == 0, first.output
    res = runner.invoke(cli.app, ["run", NAME, "--set", "value=2", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert "holds an earlier run" in res.stderr and "same-2" in res.stderr
    assert json.loads(res.stdout)["metrics"]["value"] == 2.0  # the second run's own result
    assert json.loads((out / "result.json").read_text())["metrics"]["value"] == 1.0


def test_sigterm_marks_the_run_interrupted_and_exits_143(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "stopped"
    handler = signal.getsignal(signal.SIGTERM)
    res = runner.invoke(cli.app, ["run", NAME, "--set", "sigterm=true", "--out", str(out)])
    assert res.exit_code == 143, res.output
    assert "stopped:" in res.stderr and "SIGTERM" in res.stderr and "Traceback" not in res.output
    (row,) = ResultStore(tmp_path / "runs" / "trainleak.sqlite").rows()
    assert row.status == "interrupted" and row.error == "interrupted by SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == handler  # the handler was put back


def test_report_refuses_a_database_that_is_not_a_store(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE users (id INTEGER)")
    before = other.read_bytes()
    res = runner.invoke(cli.app, ["report", str(other), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "not a trainleak store" in res.stderr
    assert other.read_bytes() == before and not (tmp_path / "r.html").exists()
