"""Progress reporting: the library reports, the caller (CLI, notebook, runner) displays.

A progress callback is ``progress(task, done, total)``. Library loops call it every so often;
they never print.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Callback signature for long loops."""

    def __call__(self, task: str, done: int, total: int) -> None: ...


def report_every(progress: Progress | None, task: str, done: int, total: int, k: int = 50) -> None:
    """Call ``progress`` at every ``k``-th step and at the last one."""
    if progress is not None and (done % k == 0 or done == total):
        progress(task, done, total)
