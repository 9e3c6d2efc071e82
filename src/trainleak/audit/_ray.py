"""The Ray backend of :func:`trainleak.audit.run_grid`.

The driver (the ``trainleak audit`` process) claims each point in the store, hands it to a Ray
task and records what the task returns; only the driver touches the SQLite store, so the store
may live on the driver's local disk. The tasks write each run's files into its folder, so the
output root must be on storage that every node mounts at the same path (NFS, CephFS, a cloud
file system). See ``docs/ray.md`` for a multi-node setup.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainleak.audit._dispatch import Dispatch, GridJob, GridOutcome, module_of, task
from trainleak.audit._pool import run_task
from trainleak.audit._signals import interrupt_reason
from trainleak.errors import import_extra


def _ray_task(modules: Sequence[str], task: tuple[str, dict[str, Any], str, int]) -> Any:
    """What a Ray worker runs: register the experiments, then run the point."""
    for module in modules:
        importlib.import_module(module)
    return run_task(task)


def _package_root() -> str:
    """The folder that holds the ``trainleak`` package (``src/`` in a checkout)."""
    return str(Path(__file__).resolve().parents[2])


def local_runtime_env() -> dict[str, Any]:
    """The ``runtime_env`` of a local cluster: its workers import this trainleak (and modules
    found on this process's path, such as those registering test experiments), one thread
    each."""
    prefixes = (sys.prefix, sys.base_prefix)
    own = [p for p in sys.path if p and Path(p).is_dir() and not p.startswith(prefixes)]
    paths = [_package_root(), *(str(Path(p).resolve()) for p in own)]
    env = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
    return {"env_vars": env}


def _init(ray: Any, address: str | None) -> None:
    if ray.is_initialized():
        return
    if address is None and not os.environ.get("RAY_ADDRESS"):
        ray.init(include_dashboard=False, runtime_env=local_runtime_env())
    else:
        ray.init(address=address)


def run_on_ray(
    runner: Dispatch, jobs: Sequence[GridJob], workers: int | None, address: str | None
) -> list[GridOutcome]:
    """Run ``jobs`` as Ray tasks, at most ``workers`` (default: the cluster's CPUs) at a time."""
    ray = import_extra("ray", "distributed", "the ray backend")
    _init(ray, address)
    limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    modules = sorted({module_of(j.experiment) for j in jobs})
    remote = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
    pending, outcomes = list(reversed(jobs)), []
    inflight: dict[Any, tuple[GridJob, int, Path]] = {}
    try:
        while pending or inflight:
            while pending and len(inflight) < limit:
                job = pending.pop()
                claimed = runner.claim(job)
                if isinstance(claimed, GridOutcome):
                    outcomes.append(claimed)
                    continue
                inflight[remote.remote(modules, task(job, *claimed))] = (job, *claimed)
            if not inflight:
                continue
            # a bounded wait: Python runs signal handlers (SIGTERM, Ctrl-C) between waits
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            if not ready:
                continue
            job, run_id, folder = inflight.pop(ready[0])
            try:
                reply = ray.get(ready[0])
            except Exception as exc:  # the task's worker died (Ray wraps the cause)
                outcomes.append(runner.interrupted(job, run_id, folder, f"ray task died: {exc}"))
                continue
            outcomes.append(runner.settle(job, run_id, folder, reply))
    except BaseException as exc:
        for ref, (job, run_id, folder) in inflight.items():
            ray.cancel(ref, force=True)
            runner.interrupted(job, run_id, folder, interrupt_reason(exc))
        raise
    return outcomes
