"""Audit grids: expand a YAML grid of configs and run every point not yet done.

A grid file is one mapping, or a list of them::

    experiment: kkt-reconstruction
    grid:                      # the cartesian product of these lists
      n_train: [50, 100]
      seed: [0, 1, 2]
    set:                       # fixed values for every point
      attack_steps: 2000

Every point is validated up front, then run in its own folder ``<out>/<experiment>-<hash>``
with its row in ``<out>/trainleak.sqlite``. A point already ``done`` in the store is skipped;
failed (or interrupted) points run again, so a re-run after a crash loses nothing. Points run
inline (``workers=1``), in local worker processes, or on a Ray cluster (``backend="ray"``,
needs ``pip install 'trainleak[distributed]'``; the output folder must then be on storage that
every Ray node can write).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import multiprocessing
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from trainleak.audit.runner import STORE_FILE, run_experiment
from trainleak.audit.store import ResultStore, config_hash
from trainleak.errors import ConfigError, DataNotFoundError, import_extra
from trainleak.experiments import get_experiment
from trainleak.progress import Progress
from trainleak.validation import check_choice

Backend = Literal["local", "ray"]


@dataclass(frozen=True)
class GridJob:
    """One point of a grid: the experiment, its overrides and where it runs."""

    experiment: str
    overrides: dict[str, Any]
    config_hash: str
    out_dir: Path


@dataclass(frozen=True)
class GridOutcome:
    """What happened to one point: ``done``, ``skipped`` (already done) or ``failed``."""

    job: GridJob
    status: Literal["done", "skipped", "failed"]
    error: str | None = None


def load_grid(path: str | Path) -> list[dict[str, Any]]:
    """Read a grid file: one mapping or a list of mappings (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"grid file {str(path)!r} does not exist")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"grid file {str(path)!r} is not valid YAML: {exc}") from None
    specs = doc if isinstance(doc, list) else [doc]
    for spec in specs:
        if not isinstance(spec, dict):
            raise ConfigError.invalid("grid file", "a mapping or a list of mappings", spec)
    return specs


def expand_grid(spec: Mapping[str, Any], out_root: str | Path) -> list[GridJob]:
    """Expand one grid mapping into validated jobs (duplicates removed).

    Raises:
        ConfigError: for a malformed grid or a point whose config is invalid; the message
            names the point and the field.
    """
    unknown = set(spec) - {"experiment", "grid", "set"}
    if unknown:
        raise ConfigError(
            f"unknown grid key(s) {sorted(unknown)}; expected 'experiment', 'grid', 'set'"
        )
    name, grid, fixed = spec.get("experiment"), spec.get("grid") or {}, spec.get("set") or {}
    if not isinstance(name, str):
        raise ConfigError.invalid("experiment", "an experiment name", name)
    if not isinstance(grid, dict) or not isinstance(fixed, dict):
        raise ConfigError.invalid("grid/set", "mappings of field -> value(s)", (grid, fixed))
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError.invalid(f"grid.{key}", "a non-empty list of values", values)
    exp = get_experiment(name)
    jobs: dict[str, GridJob] = {}
    for combo in itertools.product(*grid.values()):
        point = dict(zip(grid, combo))
        overrides = {**fixed, **point}
        try:
            config = exp.make_config(overrides).model_dump(mode="json")
        except ConfigError as exc:
            raise ConfigError(f"{name} grid point {point}: {exc}") from None
        digest = config_hash(config)
        out_dir = Path(out_root) / f"{name}-{digest}"
        jobs.setdefault(digest, GridJob(name, overrides, digest, out_dir))
    return list(jobs.values())


def run_grid(
    grid_yaml: str | Path,
    out_root: str | Path,
    workers: int = 1,
    *,
    backend: Backend = "local",
    progress: Progress | None = None,
) -> list[GridOutcome]:
    """Run every point of ``grid_yaml`` that is not yet done in ``<out_root>/trainleak.sqlite``.

    Args:
        grid_yaml: the grid file.
        out_root: folder for the run folders and the store.
        workers: parallel local processes (1 runs inline); ignored by the Ray backend.
        backend: ``"local"`` or ``"ray"``.
        progress: called as ``progress("grid", finished, total)``; inline runs also pass it
            to the experiments.

    Returns:
        One :class:`GridOutcome` per point, in grid order. A failing point does not stop the
        others; its row keeps the traceback.

    Raises:
        ConfigError: for a malformed grid, an invalid point, bad ``workers`` or ``backend``.
        MissingExtraError: for ``backend="ray"`` without Ray installed.
    """
    check_choice("backend", backend, ("local", "ray"))
    if not isinstance(workers, int) or workers < 1:
        raise ConfigError.invalid("workers", "a positive integer", workers)
    if backend == "ray":
        _import_ray()
    jobs = [job for spec in load_grid(grid_yaml) for job in expand_grid(spec, out_root)]
    store_path = Path(out_root) / STORE_FILE
    store = ResultStore(store_path)
    todo = [j for j in jobs if store.find_done(j.experiment, j.config_hash) is None]
    outcomes = {j.config_hash: GridOutcome(j, "skipped") for j in jobs if j not in todo}
    report = _Counter(progress, len(todo))
    if backend == "ray":
        ran = _run_ray(todo, store_path, report)
    elif workers == 1 or len(todo) <= 1:
        ran = [_outcome(j, _run_job(j, store_path, progress), report) for j in todo]
    else:
        ran = _run_pool(todo, store_path, workers, report)
    outcomes.update({o.job.config_hash: o for o in ran})
    return [outcomes[j.config_hash] for j in jobs]


class _Counter:
    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        if progress is not None:
            progress("grid", 0, total)

    def tick(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress("grid", self.done, self.total)


def _outcome(job: GridJob, error: str | None, counter: _Counter) -> GridOutcome:
    counter.tick()
    return GridOutcome(job, "failed" if error else "done", error)


def _run_job(job: GridJob, store_path: Path, progress: Progress | None = None) -> str | None:
    """Run one job; return ``None`` on success, else the error text (also in the store)."""
    try:
        run_experiment(
            job.experiment, job.overrides, job.out_dir, store_path=store_path, progress=progress
        )
    except Exception:
        return traceback.format_exc()
    return None


def _worker(job: GridJob, store_path: Path, module: str) -> str | None:
    """Entry point of a worker process: make sure the experiment is registered, then run."""
    if module not in sys.modules and module != "__main__":
        importlib.import_module(module)
    return _run_job(job, store_path)


def _run_pool(
    jobs: Sequence[GridJob], store_path: Path, workers: int, counter: _Counter
) -> list[GridOutcome]:
    # "spawn": a forked child of a process that already ran OpenMP code can hang.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_worker, j, store_path, _module_of(j.experiment)): j for j in jobs}
        return [
            _outcome(futures[f], _result_or_text(f.result), counter) for f in as_completed(futures)
        ]


def _result_or_text(get: Callable[[], str | None]) -> str | None:
    try:
        return get()
    except Exception:  # the worker process itself died
        return traceback.format_exc()


def _module_of(name: str) -> str:
    return get_experiment(name).run_fn.__module__


def _import_ray() -> Any:
    return import_extra("ray", "distributed", "the ray backend")


def _run_ray(jobs: Sequence[GridJob], store_path: Path, counter: _Counter) -> list[GridOutcome]:
    ray = _import_ray()
    if not ray.is_initialized():
        ray.init()
    remote = ray.remote(_worker)
    refs = {remote.remote(j, store_path, _module_of(j.experiment)): j for j in jobs}
    outcomes: list[GridOutcome] = []
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        ref = ready[0]
        outcomes.append(
            _outcome(refs[ref], _result_or_text(functools.partial(ray.get, ref)), counter)
        )
    return outcomes
