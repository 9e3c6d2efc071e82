"""Benchmark: one audit grid on the Ray backend with one and with two workers.

A local Ray cluster with two CPUs runs the same grid (eight points of ``deletion-reconstruction``,
numpy only, two to three seconds of CPU each) with at most one task in flight, then with two. The
Ray workers are started and warmed (trainleak imported) by a throw-away grid first, so the
timings compare execution, not process start-up. Both runs must give identical rows. The
load average of the machine is recorded beside the timings: on a machine whose cores other
programs share, two workers cannot reach twice the speed of one.

Usage:
    python benchmarks/ray_grid.py [--points 8] [--repeats 2]

Writes ``benchmarks/results/ray_grid.json`` and ``ray_grid.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

from trainleak.audit import ResultStore, run_grid
from trainleak.audit._ray import local_runtime_env

RESULTS = Path(__file__).resolve().parent / "results"
SETTINGS = {
    "n_honest": 2000,
    "trials": 300,
    "lr_n": 60,
    "lr_dim": 4,
    "deletions": [0, 1, 5, 11],
    "epsilons": [1.0],
}


def _grid(folder: Path, seeds: list[int]) -> Path:
    path = folder / f"grid-{seeds[0]}.yaml"
    lines = ["experiment: deletion-reconstruction", "grid:", f"  seed: {seeds}", "set:"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in SETTINGS.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _timed(grid: Path, out: Path, workers: int) -> tuple[float, float, dict[str, Any]]:
    start = time.perf_counter()
    outcomes = run_grid(grid, out, workers, backend="ray")
    seconds = time.perf_counter() - start
    assert all(o.status == "done" for o in outcomes), [o.error for o in outcomes]
    rows = ResultStore(out / "trainleak.sqlite", readonly=True).rows()
    docs = [json.loads((Path(r.out_dir or "") / "result.json").read_text()) for r in rows]
    cpu = sum(d["cpu_seconds"] for d in docs)
    return seconds, cpu, {r.config_hash: r.metrics for r in rows}


def _burn(cpu_seconds: float) -> float:
    """A task that only burns CPU (no trainleak, no store): the machine's own ceiling."""
    start = time.process_time()
    while time.process_time() - start < cpu_seconds:
        pass
    return cpu_seconds


def _ceiling(cpu_seconds: float = 3.0) -> float:
    """Speedup of two concurrent CPU-burning Ray tasks over one, measured now."""
    burn = ray.remote(num_cpus=1)(_burn)
    start = time.perf_counter()
    ray.get(burn.remote(cpu_seconds))
    one = time.perf_counter() - start
    start = time.perf_counter()
    ray.get([burn.remote(cpu_seconds) for _ in range(2)])
    return round(2 * one / (time.perf_counter() - start), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="trainleak-ray-bench-"))
    # Ray starts its workers at niceness 15; at 0 they compete for the cores on equal terms
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=local_runtime_env()
    )
    try:
        run_grid(_grid(work, [1000, 1001]), work / "warm", 2, backend="ray")  # start 2 workers
        grid = _grid(work, list(range(args.points)))
        runs: list[dict[str, Any]] = []
        ceilings = [_ceiling()]
        reference: dict[str, Any] | None = None
        for repeat in range(args.repeats):
            for workers in (1, 2):
                load = os.getloadavg()[0]
                seconds, cpu, rows = _timed(grid, work / f"r{repeat}-w{workers}", workers)
                reference = reference or rows
                assert rows == reference, "the grid gave different rows"
                runs.append(
                    {
                        "repeat": repeat,
                        "workers": workers,
                        "seconds": round(seconds, 2),
                        "task_cpu_seconds": round(cpu, 2),
                        "cpu_per_wall": round(cpu / seconds, 2),
                        "load_before": round(load, 2),
                    }
                )
                print(runs[-1], flush=True)
            ceilings.append(_ceiling())
    finally:
        ray.shutdown()
    best = {w: min(r["seconds"] for r in runs if r["workers"] == w) for w in (1, 2)}
    median = {w: statistics.median(r["seconds"] for r in runs if r["workers"] == w) for w in (1, 2)}
    doc = {
        "grid": {"experiment": "deletion-reconstruction", "points": args.points, **SETTINGS},
        "ray": ray.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "runs": runs,
        "best_seconds": best,
        "speedup": round(best[1] / best[2], 2),
        "median_seconds": median,
        "median_speedup": round(median[1] / median[2], 2),
        "ceiling_speedups": ceilings,
        "identical_rows": True,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ray_grid.json").write_text(json.dumps(doc, indent=2) + "\n")
    (RESULTS / "ray_grid.md").write_text(_markdown(doc))
    print(f"speedup {doc['speedup']}x: {RESULTS / 'ray_grid.md'}")


def _markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# One audit grid on Ray: one worker against two",
        "",
        f"`python benchmarks/ray_grid.py`: a local Ray {doc['ray']} cluster with 2 CPUs on a "
        f"{doc['cpus']}-core machine runs {doc['grid']['points']} points of "
        "`deletion-reconstruction` (settings in `ray_grid.json`) with at most one and at most "
        "two tasks in flight, after a warm-up that starts both Ray workers. Both give "
        "identical rows.",
        "",
        f"**Best of {len(doc['runs']) // 2}: {doc['best_seconds'][1]} s with one worker, "
        f"{doc['best_seconds'][2]} s with two: speedup {doc['speedup']}x** (the aim was 1.8x); "
        f"medians {doc['median_seconds'][1]} s and {doc['median_seconds'][2]} s: "
        f"{doc['median_speedup']}x.",
        "",
        "Ceiling, measured in the same session: two Ray tasks that only burn CPU (no trainleak, "
        "no store) ran " + ", ".join(f"{c}x" for c in doc["ceiling_speedups"]) + " as fast as "
        "one, before and after each repeat. The grid cannot scale beyond what the machine "
        "gives two processes.",
        "",
        "| repeat | workers | wall seconds | CPU seconds of the tasks | CPU per wall second "
        "| load average before |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["runs"]:
        lines.append(
            f"| {r['repeat']} | {r['workers']} | {r['seconds']} | {r['task_cpu_seconds']} "
            f"| {r['cpu_per_wall']} | {r['load_before']} |"
        )
    lines += [
        "",
        "*CPU per wall second* is the CPU time the grid's tasks received per second of the "
        "grid's wall time: at most 1 with one worker and 2 with two. The load average counts "
        "processes that want a core; above 2 on this 2-core machine, other programs took CPU "
        "time that the workers would otherwise have had, and the speedup measured here is "
        "then a lower bound of what two free cores give.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
