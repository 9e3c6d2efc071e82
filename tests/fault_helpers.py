"""A tiny experiment for the fault tests, and the entry point of ``fault_main.py``.

The experiment ``_test-sleep`` sleeps ``seconds`` (in small steps, so a signal lands
mid-run), then returns its ``value`` as a metric and a small image. ``python fault_main.py
audit GRID OUT WORKERS`` starts an audit, ``python fault_main.py run OUT STORE VALUE`` one run,
the way the CLI does but without importing the attacks, so a process starts in about a
second. Exit codes follow the CLI: 0 done, 1 a point
failed or was interrupted, 128 + signal number when a signal stopped it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from pydantic import Field

from trainleak.audit import RunInterrupted, record_run, run_grid
from trainleak.experiments.base import ExperimentConfig, Result, experiment
from trainleak.progress import Progress

NAME = "_test-sleep"
HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


class SleepConfig(ExperimentConfig):
    """Config of the sleeping test experiment."""

    value: int = 0
    seconds: float = Field(0.2, ge=0)


@experiment(NAME, "Sleep, then echo a value (fault tests only).", SleepConfig)
def sleep_then_echo(cfg: SleepConfig, progress: Progress | None) -> Result:
    """Sleep ``seconds`` in 20 ms steps, then return ``value`` and an image."""
    end = time.monotonic() + cfg.seconds
    while time.monotonic() < end:
        time.sleep(0.02)
    result = Result(experiment=NAME, config=cfg.model_dump())
    result.metrics = {"value": cfg.value, "pid": os.getpid()}
    result.claim("the value is non-negative", cfg.value >= 0, value=cfg.value)
    result.images["grid"] = np.full((4, 4), (cfg.value % 7) / 7.0)
    return result


def grid_text(n: int, seconds: float) -> str:
    """A grid of ``n`` points of the sleeping experiment."""
    return f"experiment: {NAME}\ngrid:\n  value: {list(range(n))}\nset:\n  seconds: {seconds}\n"


def script_env(heartbeat: float = 0.5) -> dict[str, str]:
    """Environment for the script: this checkout's sources first, a fast heartbeat."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")])
    env["TRAINLEAK_HEARTBEAT_SECONDS"] = str(heartbeat)
    env["OMP_NUM_THREADS"] = "1"
    return env


def command(*args: str) -> list[str]:
    """The command line that runs :func:`main` with ``args`` in a new process."""
    return [sys.executable, str(HERE / "fault_main.py"), *args]


def main(argv: list[str]) -> int:
    try:
        if argv[0] == "audit":
            grid, out, workers = argv[1], argv[2], int(argv[3])
            outcomes = run_grid(grid, out, workers)
            return int(any(o.status in ("failed", "interrupted") for o in outcomes))
        out, store, value = argv[1], argv[2], int(argv[3])
        done = record_run(NAME, {"value": value, "seconds": 0.3}, out, store_path=store)
        print(done.out_dir, flush=True)
        return 0
    except RunInterrupted as exc:
        return 128 + exc.signum
