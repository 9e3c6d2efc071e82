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

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

from trainleak.audit._dispatch import (
    Counter,
    Dispatch,
    GridJob,
    GridOutcome,
    module_of,
    task,
)
from trainleak.audit._owner import Heartbeat
from trainleak.audit._pool import WorkerPool, exit_text
from trainleak.audit._ray import run_on_ray
from trainleak.audit._signals import interrupt_reason, signals_raise
from trainleak.audit.runner import STORE_FILE
from trainleak.audit.store import ResultStore, config_hash
from trainleak.errors import ConfigError, DataNotFoundError, import_extra
from trainleak.experiments import get_experiment
from trainleak.progress import Progress
from trainleak.validation import check_choice

Backend = Literal["local", "ray"]


def load_grid(path: str | Path) -> list[dict[str, Any]]:
    """Read a grid file: one mapping or a list of mappings (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"grid file {str(path)!r} does not exist")
    try:
        doc = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"grid file {str(path)!r} is not UTF-8 text: {exc}") from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # ValueError: a bad date
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
    workers: int | None = None,
    *,
    backend: Backend = "local",
    progress: Progress | None = None,
    ray_address: str | None = None,
) -> list[GridOutcome]:
    """Run every point of ``grid_yaml`` that is not yet done in ``<out_root>/trainleak.sqlite``.

    Each point is claimed in the store just before it runs (:meth:`ResultStore.claim`), so
    two audits on one output folder share the work and never run a point twice. Each run gets
    its own folder (``<experiment>-<hash>``, or ``-2``, ``-3``... for a retry). SIGTERM, SIGHUP
    and Ctrl-C stop the workers and mark their runs interrupted; a killed audit's workers die
    with it, and its runs are marked interrupted when the store is next opened.

    Args:
        grid_yaml: the grid file.
        out_root: folder for the run folders and the store.
        workers: parallel local processes (default 1, which runs inline); with the Ray
            backend, the most tasks in flight (default: the cluster's CPUs).
        backend: ``"local"`` or ``"ray"``.
        progress: called as ``progress("grid", finished, total)``; inline runs also pass it
            to the experiments.
        ray_address: the Ray cluster to connect to (default: ``$RAY_ADDRESS``, else a local
            one); used only when Ray is not initialised yet.

    Returns:
        One :class:`GridOutcome` per point, in grid order. A failing point does not stop the
        others; its row keeps the traceback.

    Raises:
        ConfigError: for a malformed grid, an invalid point, bad ``workers`` or ``backend``.
        MissingExtraError: for ``backend="ray"`` without Ray installed, or an experiment
            whose extra is missing.
        RunInterrupted: SIGTERM or SIGHUP arrived (``KeyboardInterrupt`` for Ctrl-C).
    """
    check_choice("backend", backend, ("local", "ray"))
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ConfigError.invalid("workers", "a positive integer", workers)
    if backend == "ray":
        _import_ray()
    jobs = [job for spec in load_grid(grid_yaml) for job in expand_grid(spec, out_root)]
    for name in dict.fromkeys(j.experiment for j in jobs):
        get_experiment(name).check_extras()
    store = ResultStore(Path(out_root) / STORE_FILE)
    todo = [j for j in jobs if store.find_done(j.experiment, j.config_hash) is None]
    outcomes = {j.config_hash: GridOutcome(j, "skipped") for j in jobs if j not in todo}
    counter = Counter(progress, len(todo))
    runner = Dispatch(store, counter)
    with signals_raise(), Heartbeat(store.beat):
        if backend == "ray":
            ran = run_on_ray(runner, todo, workers, ray_address)
        elif (workers or 1) == 1 or len(todo) <= 1:
            ran = [runner.inline(j, progress) for j in todo]
        else:
            ran = _run_pool(runner, todo, workers or 1)
    outcomes.update({o.job.config_hash: o for o in ran})
    return [outcomes[j.config_hash] for j in jobs]


Claimed = tuple[GridJob, int, Path]


def _next(runner: Dispatch, pending: list[GridJob], outcomes: list[GridOutcome]) -> Claimed | None:
    """Claim the next pending point that is neither done nor running elsewhere."""
    while pending:
        job = pending.pop()
        claimed = runner.claim(job)
        if not isinstance(claimed, GridOutcome):
            return (job, *claimed)
        outcomes.append(claimed)
    return None


def _run_pool(runner: Dispatch, jobs: Sequence[GridJob], workers: int) -> list[GridOutcome]:
    """Run ``jobs`` on local worker processes, claiming each point just before it starts.

    A point whose worker died before receiving it keeps its claim and goes to the next worker;
    a point whose worker died while running it is recorded as interrupted.
    """
    pool = WorkerPool(min(workers, len(jobs)), sorted({module_of(j.experiment) for j in jobs}))
    pending, ready, outcomes = list(reversed(jobs)), list[Claimed](), list[GridOutcome]()
    try:
        while pending or ready or pool.busy():
            for worker in pool.idle() if pending or ready else []:
                item = ready.pop() if ready else _next(runner, pending, outcomes)
                if item is not None and not pool.submit(worker, item, task(*item)):
                    ready.append(item)  # that worker had died: the next one takes it
            for worker, (job, run_id, folder), reply in pool.wait():
                if reply is None:
                    why = f"worker process {worker.process.pid} " + exit_text(
                        worker.extra.get("exitcode")
                    )
                    outcomes.append(runner.interrupted(job, run_id, folder, why))
                else:
                    outcomes.append(runner.settle(job, run_id, folder, reply))
    except BaseException as exc:  # a signal or Ctrl-C: stop the workers, record their runs
        pool.close(kill=True)
        for job, run_id, folder in [w.job for w in pool.busy()] + ready:
            runner.interrupted(job, run_id, folder, interrupt_reason(exc))
        raise
    pool.close()
    return outcomes


def _import_ray() -> Any:
    return import_extra("ray", "distributed", "the ray backend")
