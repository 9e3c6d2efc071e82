"""Tests of trainleak.audit: store, runner, report and grid, on a tiny registered experiment."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image
from pydantic import Field

from trainleak.audit import (
    ResultStore,
    config_hash,
    dumps,
    expand_grid,
    run_experiment,
    run_grid,
    write_report,
)
from trainleak.errors import ConfigError, DataNotFoundError, MissingExtraError
from trainleak.experiments.base import ExperimentConfig, Result, experiment
from trainleak.progress import Progress, report_every

NAME = "_test-echo-audit"


class EchoConfig(ExperimentConfig):
    """Config of the test experiment."""

    value: float = 1.0
    steps: int = Field(3, ge=1)
    fail: bool = False
    fail_if_exists: str | None = None


@experiment(NAME, "Echo its config back (test only).", EchoConfig)
def echo(cfg: EchoConfig, progress: Progress | None) -> Result:
    """Report progress, optionally fail, and return one of everything a Result can hold."""
    for i in range(1, cfg.steps + 1):
        report_every(progress, "echo", i, cfg.steps, k=1)
    if cfg.fail or (cfg.fail_if_exists and Path(cfg.fail_if_exists).exists()):
        raise RuntimeError(f"echo failed on purpose (value={cfg.value})")
    result = Result(experiment=NAME, config=cfg.model_dump())
    result.metrics = {
        "value": cfg.value,
        "np_value": np.float32(cfg.value),
        "nan": float("nan"),
        "psnr": float("inf"),
        "tensor": torch.tensor([1.0, 2.0]),
    }
    result.claim("the echoed value is positive <b>", cfg.value > 0, value=cfg.value)
    result.claim("the echoed value exceeds 100", cfg.value > 100, value=np.float64(cfg.value))
    result.tables["rows"] = [{"method": "echo", "value": cfg.value, "count": 3}]
    result.images["grid"] = np.linspace(0.0, 1.0, 64).reshape(8, 8)
    result.images["rgb"] = np.zeros((4, 5, 3), dtype=np.uint8)
    fig = Figure(figsize=(2, 2))
    fig.add_subplot().plot([0, 1], [0, cfg.value])
    result.figures["curve"] = fig
    result.notes = "notes & more"
    return result


# --- serialisation and store ---------------------------------------------------------------


def test_dumps_handles_numpy_torch_nan_and_inf() -> None:
    text = dumps(
        {
            "a": np.float32(0.5),
            "b": torch.tensor([float("nan"), 1.0]),
            "c": np.arange(3).reshape(1, 3),
            "d": (np.int64(2), float("-inf")),
            "e": Path("x/y"),
            "f": torch.tensor(7),
        }
    )
    assert json.loads(text) == {
        "a": 0.5,
        "b": [None, 1.0],
        "c": [[0, 1, 2]],
        "d": [2, "-inf"],
        "e": "x/y",
        "f": 7,
    }


def test_config_hash_is_stable_and_order_free() -> None:
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_store_records_done_and_failed_runs(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "deep" / "s.sqlite")
    cfg = {"seed": 0, "value": 1.5}
    done_id = store.start("exp", cfg, tmp_path)
    result = Result("exp", cfg, metrics={"m": np.float64(2.0), "bad": float("nan")})
    result.claim("it works", True, n=np.int64(3))
    store.finish(done_id, result)
    failed_id = store.start("exp", {"seed": 1})
    store.fail(failed_id, "Traceback: ValueError: broken")
    done, failed = store.rows()
    assert (done.status, failed.status) == ("done", "failed")
    assert done.metrics == {"m": 2.0, "bad": None}
    assert done.claims == [{"text": "it works", "holds": True, "evidence": {"n": 3}}]
    assert done.config == cfg and done.out_dir == str(tmp_path) and done.finished
    assert failed.error == "Traceback: ValueError: broken"
    found = store.find_done("exp", config_hash(cfg))
    assert found is not None and found.id == done_id
    assert store.find_done("exp", config_hash({"seed": 1})) is None
    with pytest.raises(KeyError):
        store.fail(999, "no such run")


# --- runner --------------------------------------------------------------------------------


def test_run_experiment_writes_result_files_and_store_row(tmp_path: Path) -> None:
    calls: list[tuple[str, int, int]] = []
    out = tmp_path / "runs" / "one"
    result = run_experiment(
        NAME, {"value": 2.5}, out, progress=lambda t, d, n: calls.append((t, d, n))
    )
    assert calls == [("echo", 1, 3), ("echo", 2, 3), ("echo", 3, 3)]
    doc = json.loads((out / "result.json").read_text())
    assert doc["experiment"] == NAME and doc["config"]["value"] == 2.5
    assert doc["metrics"] == {
        "value": 2.5,
        "np_value": 2.5,
        "nan": None,
        "psnr": "inf",
        "tensor": [1.0, 2.0],
    }
    assert [c["holds"] for c in doc["claims"]] == [True, False]
    assert doc["claims"][0]["evidence"] == {"value": 2.5}
    assert doc["tables"]["rows"][0]["count"] == 3 and doc["notes"] == "notes & more"
    assert doc["wall_seconds"] >= 0
    assert result.artifacts == doc["artifacts"]
    for key in ("images/grid", "images/rgb", "figures/curve"):
        rel = result.artifacts[key]
        assert not Path(rel).is_absolute()
        with Image.open(out / rel) as img:
            assert img.format == "PNG"
    with Image.open(out / result.artifacts["images/grid"]) as img:
        assert img.size == (8, 8) and img.mode == "L"
        assert np.asarray(img)[-1, -1] == 255
    (row,) = ResultStore(tmp_path / "runs" / "trainleak.sqlite").rows()  # default store
    assert row.status == "done" and row.metrics["value"] == 2.5


def test_run_experiment_failure_marks_row_failed_with_traceback(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with pytest.raises(RuntimeError, match="on purpose"):
        run_experiment(NAME, {"fail": True, "value": 7}, tmp_path / "r", store_path=store)
    (row,) = ResultStore(store).rows()
    assert row.status == "failed"
    assert "RuntimeError: echo failed on purpose (value=7.0)" in (row.error or "")
    assert "Traceback" in (row.error or "")


def test_invalid_config_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with pytest.raises(ConfigError, match="'steps'"):
        run_experiment(NAME, {"steps": 0}, tmp_path / "r", store_path=store)
    with pytest.raises(ConfigError, match="unknown config field 'nope'"):
        run_experiment(NAME, {"nope": 1}, tmp_path / "r", store_path=store)
    with pytest.raises(ConfigError, match="experiment"):
        run_experiment("_no-such-experiment", {}, tmp_path / "r", store_path=store)
    assert not store.exists()


# --- report --------------------------------------------------------------------------------


def test_report_shows_claims_tables_images_and_failures(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_experiment(NAME, {"value": 3.0}, root / "good")
    with pytest.raises(RuntimeError):
        run_experiment(NAME, {"fail": True}, root / "bad")
    page = write_report([root / "trainleak.sqlite"], tmp_path / "out" / "report.html")
    text = page.read_text()
    assert "the echoed value is positive &lt;b&gt;" in text  # escaped
    assert "<b>" not in text.replace("<body>", "")
    assert "&#10004; holds" in text and "&#10008; does not hold" in text
    assert text.count('<img src="data:image/png;base64,') == 3
    assert "notes &amp; more" in text and "<th>count</th>" in text
    assert "echo failed on purpose" in text and 'class="status failed"' in text
    single = write_report([root / "good"], tmp_path / "single.html").read_text()
    assert single.count("<h2 ") == 1 and "<img" in single
    folder = write_report([root], tmp_path / "folder.html").read_text()
    assert folder.count("<h2 ") == 1  # only the finished run has a result.json
    with pytest.raises(DataNotFoundError, match="no results"):
        write_report([tmp_path / "missing"], tmp_path / "x.html")


# --- grid ----------------------------------------------------------------------------------


def _grid_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    return path


def test_grid_runs_points_skips_done_and_retries_failed(tmp_path: Path) -> None:
    marker = tmp_path / "fail-now"
    marker.touch()
    grid = _grid_file(
        tmp_path,
        f"experiment: {NAME}\ngrid:\n  value: [1, 2]\n  fail_if_exists: [null, '{marker}']\n"
        "set:\n  steps: 1\n",
    )
    out = tmp_path / "audit"
    first = run_grid(grid, out)
    assert [o.status for o in first] == ["done", "failed", "done", "failed"]
    assert "on purpose" in (first[1].error or "")
    marker.unlink()
    seen: list[tuple[str, int, int]] = []
    second = run_grid(grid, out, progress=lambda t, d, n: seen.append((t, d, n)))
    assert [o.status for o in second] == ["skipped", "done", "skipped", "done"]
    assert seen[0] == ("grid", 0, 2) and seen[-1] == ("grid", 2, 2)
    assert [o.status for o in run_grid(grid, out)] == ["skipped"] * 4
    rows = ResultStore(out / "trainleak.sqlite").rows()
    assert [r.status for r in rows].count("failed") == 2 and len(rows) == 6
    retried = [o for o in second if o.status == "done"]
    for o in retried:  # a retry runs in a fresh folder beside the failed run's
        assert o.out_dir is not None and o.out_dir.name == f"{o.job.out_dir.name}-2"
        assert json.loads((o.out_dir / "result.json").read_text())["run_id"] == o.run_id
        assert not (o.job.out_dir / "result.json").exists()


def test_grid_runs_in_worker_processes(tmp_path: Path) -> None:
    grid = _grid_file(tmp_path, f"experiment: {NAME}\ngrid:\n  value: [4, 5]\n")
    outcomes = run_grid(grid, tmp_path / "audit", workers=2)
    assert [o.status for o in outcomes] == ["done", "done"]
    values = sorted(
        r.metrics["value"] for r in ResultStore(tmp_path / "audit/trainleak.sqlite").rows()
    )
    assert values == [4.0, 5.0]


def test_grid_expansion_validates_points(tmp_path: Path) -> None:
    jobs = expand_grid({"experiment": NAME, "grid": {"value": [1, 1.0, 2]}}, tmp_path)
    assert len(jobs) == 2  # 1 and 1.0 validate to the same config
    assert jobs[0].out_dir.parent == tmp_path and jobs[0].config_hash in jobs[0].out_dir.name
    with pytest.raises(ConfigError, match=r"grid point \{'steps': 0\}.*'steps'"):
        expand_grid({"experiment": NAME, "grid": {"steps": [1, 0]}}, tmp_path)
    with pytest.raises(ConfigError, match="'grid.value'"):
        expand_grid({"experiment": NAME, "grid": {"value": 3}}, tmp_path)
    with pytest.raises(ConfigError, match="unknown grid key"):
        expand_grid({"experiment": NAME, "grids": {}}, tmp_path)
    with pytest.raises(ConfigError, match="'workers'"):
        run_grid(_grid_file(tmp_path, f"experiment: {NAME}\n"), tmp_path, workers=0)


def test_ray_backend_without_ray_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    grid = _grid_file(tmp_path, f"experiment: {NAME}\n")
    with pytest.raises(MissingExtraError, match=r"pip install 'trainleak\[distributed\]'"):
        run_grid(grid, tmp_path / "audit", backend="ray")
    assert not (tmp_path / "audit").exists()


def test_nan_metrics_never_reach_json_as_nan(tmp_path: Path) -> None:
    run_experiment(NAME, {}, tmp_path / "r")
    text = (tmp_path / "r" / "result.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["metrics"]["nan"] is None
