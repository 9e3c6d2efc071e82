"""The Ray backend of ``trainleak audit``, against a local Ray cluster started by the test.

The same grid run inline and on Ray gives the same rows (metrics and claims, point by point);
the store is written by the driver only, the run folders by the Ray workers. Without Ray the
test skips with the reason, and fails under ``CI=true`` (``.ci/run`` installs the extra).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import require_module
from trainleak.audit import ResultStore, run_grid
from trainleak.audit._ray import local_runtime_env

GRID = """
experiment: deletion-reconstruction
grid:
  seed: [0, 1, 2]
set:
  n_honest: 200
  trials: 10
  lr_n: 20
  lr_dim: 2
  deletions: [0, 1, 3]
  epsilons: [1.0]
"""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    ray = require_module("ray", "pip install 'trainleak[distributed]'")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env=local_runtime_env(),
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def _rows(out: Path) -> dict[str, tuple[Any, Any]]:
    rows = ResultStore(out / "trainleak.sqlite", readonly=True).rows()
    assert [r.status for r in rows] == ["done"] * len(rows)
    return {r.config_hash: (r.metrics, r.claims) for r in rows}


def test_ray_backend_gives_the_local_results(tmp_path: Path, ray_cluster: Any) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    local = run_grid(grid, tmp_path / "local")
    remote = run_grid(grid, tmp_path / "ray", backend="ray")
    assert [o.status for o in local] == ["done"] * 3 and [o.status for o in remote] == ["done"] * 3
    assert _rows(tmp_path / "local") == _rows(tmp_path / "ray")
    for o in remote:  # each run's files, written by a Ray worker, name that run
        assert o.out_dir is not None
        assert json.loads((o.out_dir / "result.json").read_text())["run_id"] == o.run_id
    assert [o.status for o in run_grid(grid, tmp_path / "ray", backend="ray")] == ["skipped"] * 3
