"""Worker processes for a local audit that never outlive the audit.

Each worker is a ``spawn``-started process with its own pipe (no queue shared between workers,
so a worker killed mid-read cannot leave a lock held for the others). A worker dies with its
parent: on Linux the kernel sends it SIGKILL when the parent dies (``PR_SET_PDEATHSIG``), and on
every platform a watchdog thread kills it within a quarter second of noticing that its parent
changed. The parent notices a dead worker through its process sentinel, so the job it held is
reported instead of waited for.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from trainleak.audit.runner import execute

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Make this process end when process ``parent_pid`` (its parent) ends."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.25)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="trainleak-parent-watch", daemon=True).start()


def run_task(task: tuple[str, dict[str, Any], str, int]) -> tuple[str, Any]:
    """Run one grid point in this process: ``("done", document)`` or ``("failed", text)``.

    ``task`` is ``(experiment, overrides, folder, run_id)``; the document keeps only what the
    store records (metrics, claims, artifacts).
    """
    name, overrides, folder, run_id = task
    try:
        _, doc = execute(name, overrides, Path(folder), run_id)
    except Exception:
        return "failed", traceback.format_exc()
    return "done", {k: doc[k] for k in ("metrics", "claims", "artifacts")}


def _worker_main(conn: Connection, parent_pid: int, modules: Sequence[str]) -> None:
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for module in modules:
        importlib.import_module(module)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(run_task(task))


@dataclass(eq=False)
class Worker:
    """A worker process, its end of the pipe, and the job it holds (if any)."""

    process: BaseProcess
    conn: Connection
    job: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class WorkerPool:
    """``size`` spawned workers; :meth:`wait` reports finished jobs and dead workers.

    Args:
        size: number of processes.
        modules: modules every worker imports first (those that register the experiments).
    """

    def __init__(self, size: int, modules: Sequence[str]) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._modules = list(modules)
        self.size = size
        self.workers: list[Worker] = []
        self.dead: list[Worker] = []
        self.finished = 0

    def _spawn(self) -> Worker:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_worker_main,
            args=(child, os.getpid(), self._modules),
            name="trainleak-audit-worker",
            daemon=True,
        )
        proc.start()
        child.close()
        return Worker(proc, parent)

    def idle(self) -> list[Worker]:
        """Workers without a job, starting new ones (in place of dead ones) up to ``size``."""
        for w in [w for w in self.workers if w.job is None and not w.process.is_alive()]:
            self._bury(w)
        while len(self.workers) < self.size:
            self.workers.append(self._spawn())
        return [w for w in self.workers if w.job is None]

    def busy(self) -> list[Worker]:
        """Workers holding a job."""
        return [w for w in self.workers if w.job is not None]

    def submit(self, worker: Worker, job: Any, task: tuple[str, dict[str, Any], str, int]) -> bool:
        """Hand ``task`` to idle ``worker``; ``job`` is the caller's handle for it.

        Returns:
            False when the worker had died (it is dropped; :meth:`idle` starts another).

        Raises:
            RuntimeError: workers keep dying before they finish a single job (for example an
                experiment module that fails to import in a fresh process).
        """
        try:
            worker.conn.send(task)
        except OSError:
            self._bury(worker)
            return False
        worker.job = job
        return True

    def wait(self) -> list[tuple[Worker, Any, tuple[str, Any] | None]]:
        """Block until a busy worker reports or dies.

        Returns:
            ``(worker, job, reply)`` per event; ``reply`` is None when the worker died (its
            exit code is then in ``worker.extra["exitcode"]``; :meth:`idle` starts a new one),
            else what :func:`run_task` returned.
        """
        busy = self.busy()
        if not busy:
            return []
        handles: list[Any] = [w.conn for w in busy] + [w.process.sentinel for w in busy]
        ready = set(wait(handles))
        events = []
        for w in busy:
            reply = None
            if w.conn in ready:
                with contextlib.suppress(EOFError, OSError):
                    reply = w.conn.recv()
            if reply is None and w.conn not in ready and w.process.sentinel not in ready:
                continue
            job, w.job = w.job, None
            events.append((w, job, reply))
            if reply is None:
                self._bury(w)
            else:
                self.finished += 1
        return events

    def _bury(self, dead: Worker) -> None:
        dead.process.join(timeout=5.0)
        dead.extra["exitcode"] = dead.process.exitcode
        dead.conn.close()
        self.workers.remove(dead)
        self.dead.append(dead)
        if len(self.dead) > 3 * self.size + self.finished:
            raise RuntimeError(
                f"{len(self.dead)} audit worker processes died after only {self.finished} "
                f"finished jobs (the last {exit_text(dead.process.exitcode)}); giving up"
            )

    def close(self, *, kill: bool = False) -> None:
        """Stop every worker: ask politely, or (``kill``) SIGKILL them; then reap them."""
        for w in self.workers:
            if kill:
                w.process.kill()
            else:
                with contextlib.suppress(OSError):
                    w.conn.send(None)
        for w in self.workers:
            w.process.join(timeout=10.0)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()


def exit_text(exitcode: int | None) -> str:
    """``"killed by SIGKILL"``, ``"exited with code 1"``... for a worker's exit code."""
    if exitcode is None:
        return "ended"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"
