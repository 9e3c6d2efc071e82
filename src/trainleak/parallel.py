"""Independent jobs spread over worker processes.

:func:`pmap` runs a module-level function over a list of items in ``workers`` spawned
processes (one torch thread each, so the workers share the cores instead of fighting over them)
and returns the results in the items' order. Jobs and results travel between this process and
its own workers through ``multiprocessing``'s pipes; nothing is read back from disk. A job
whose function is seeded by its item gives the same result in a worker as in this process, up
to the floating-point order of the thread count. With ``workers <= 1`` the items are mapped
here, one after the other.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import TypeVar

import torch

from trainleak.progress import Progress

T = TypeVar("T")
R = TypeVar("R")


def cpu_times() -> tuple[float, float]:
    """CPU seconds so far of this process (all threads) and of the child processes it has
    waited for (a finished :func:`pmap` pool; not Ray's workers, which are not our children).

    Example:
        >>> own, children = cpu_times()
        >>> own > 0 and children >= 0
        True
    """
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), kids.ru_utime + kids.ru_stime


def _single_thread() -> None:
    torch.set_num_threads(1)


def pmap(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    progress: Progress | None = None,
    label: str = "jobs",
) -> list[R]:
    """``[fn(item) for item in items]``, in ``workers`` processes.

    ``fn`` must be importable by name (a module-level function) and the items and results
    picklable. Progress is reported once per finished item.

    Raises:
        Exception: the first error a job raised (the jobs not yet started are cancelled).
    """
    with pmap_started(fn, items, workers) as collect:
        return collect(progress, label)


Collect = Callable[[Progress | None, str], list[R]]


@contextlib.contextmanager
def pmap_started(fn: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[Collect[R]]:
    """:func:`pmap`'s jobs submitted to the workers now, their results collected later: the
    caller works meanwhile (in this process, with :func:`one_thread` where the workers
    already fill the cores) and then calls the yielded ``collect(progress, label)`` inside
    the block. With ``workers <= 1`` (or one item) nothing starts early: ``collect`` maps
    the items here. Leaving the block cancels the jobs not yet started and waits for the rest.

    Raises:
        Exception: from ``collect``, the first error a job raised.
    """
    n = len(items)
    if workers <= 1 or n <= 1:

        def here(progress: Progress | None, label: str) -> list[R]:
            out = []
            for i, item in enumerate(items):
                out.append(fn(item))
                if progress is not None:
                    progress(label, i + 1, n)
            return out

        yield here
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, n), ctx, _single_thread) as pool:
        index: dict[Future[R], int] = {pool.submit(fn, item): i for i, item in enumerate(items)}

        def gather(progress: Progress | None, label: str) -> list[R]:
            results: list[R | None] = [None] * n
            pending, done = set(index), 0
            while pending:
                # one item at a time, so progress moves as each job ends (FIRST_EXCEPTION
                # would only return once every job had finished)
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    results[index[f]] = f.result()
                    done += 1
                    if progress is not None:
                        progress(label, done, n)
            return results  # type: ignore[return-value]

        try:
            yield gather
        finally:
            for f in index:
                f.cancel()


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """This process's torch ops on one thread for the block (then the former count): while
    worker processes fill the cores, a second intra-op thread only competes with them, and
    on the small networks of the experiments it does not speed this process up either."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
