"""Claiming grid points, handing them to workers, and recording what comes back.

Shared by the local pool and the Ray backend: only the process that dispatches (the audit's
main process) touches the store; workers run the experiment and write the run's files.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from trainleak.audit._signals import RunInterrupted, interrupt_reason
from trainleak.audit.runner import claim_folder, execute
from trainleak.audit.store import ResultStore
from trainleak.experiments import get_experiment
from trainleak.progress import Progress


@dataclass(frozen=True)
class GridJob:
    """One point of a grid: the experiment, its overrides and where it runs."""

    experiment: str
    overrides: dict[str, Any]
    config_hash: str
    out_dir: Path


Status = Literal["done", "skipped", "busy", "failed", "interrupted"]


@dataclass(frozen=True)
class GridOutcome:
    """What happened to one point.

    ``status`` is ``done``, ``skipped`` (already done before), ``busy`` (another audit runs it
    now), ``failed`` (``error`` holds the traceback) or ``interrupted`` (its worker died or a
    signal stopped it). ``run_id`` and ``out_dir`` name the run and its own folder, when this
    call ran it.
    """

    job: GridJob
    status: Status
    error: str | None = None
    run_id: int | None = None
    out_dir: Path | None = None


class Counter:
    """Reports ``progress("grid", finished, total)`` as points finish."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        if progress is not None:
            progress("grid", 0, total)

    def tick(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress("grid", self.done, self.total)


@dataclass
class Dispatch:
    """Claims points in the store, hands them out, and records what came back."""

    store: ResultStore
    counter: Counter

    def claim(self, job: GridJob) -> tuple[int, Path] | GridOutcome:
        """Claim ``job``: its run id and own folder, or the outcome when it is not to run."""
        config = get_experiment(job.experiment).make_config(job.overrides).model_dump(mode="json")
        run_id = self.store.claim(job.experiment, config)
        if run_id is None:
            self.counter.tick()
            done = self.store.find_done(job.experiment, job.config_hash) is not None
            return GridOutcome(job, "skipped" if done else "busy")
        folder = claim_folder(job.out_dir, run_id)
        self.store.set_out_dir(run_id, folder.resolve())
        return run_id, folder

    def settle(
        self, job: GridJob, run_id: int, folder: Path, reply: tuple[str, Any]
    ) -> GridOutcome:
        """Record a worker's reply ``("done", doc)`` or ``("failed", text)``."""
        self.counter.tick()
        kind, payload = reply
        if kind == "done":
            self.store.finish(run_id, payload)
            return GridOutcome(job, "done", run_id=run_id, out_dir=folder)
        self.store.fail(run_id, str(payload))
        return GridOutcome(job, "failed", str(payload), run_id, folder)

    def interrupted(self, job: GridJob, run_id: int, folder: Path, reason: str) -> GridOutcome:
        """Record a run whose process died or was stopped."""
        self.counter.tick()
        self.store.interrupt(run_id, reason)
        return GridOutcome(job, "interrupted", reason, run_id, folder)

    def inline(self, job: GridJob, progress: Progress | None) -> GridOutcome:
        """Claim and run ``job`` in this process."""
        claimed = self.claim(job)
        if isinstance(claimed, GridOutcome):
            return claimed
        run_id, folder = claimed
        try:
            _, doc = execute(job.experiment, job.overrides, folder, run_id, progress)
        except (KeyboardInterrupt, RunInterrupted) as exc:
            self.interrupted(job, run_id, folder, interrupt_reason(exc))
            raise
        except Exception:
            return self.settle(job, run_id, folder, ("failed", traceback.format_exc()))
        return self.settle(job, run_id, folder, ("done", doc))


def task(job: GridJob, run_id: int, folder: Path) -> tuple[str, dict[str, Any], str, int]:
    """What a worker needs to run a claimed point: experiment, overrides, folder, run id."""
    return job.experiment, dict(job.overrides), str(folder), run_id


def module_of(name: str) -> str:
    """The module that registers experiment ``name`` (a fresh worker imports it first)."""
    return get_experiment(name).run_fn.__module__
