"""Termination signals as exceptions, so a run can record that it was interrupted.

By default SIGTERM (and SIGHUP) end Python without unwinding, and the store would keep a
``running`` row until the next open notices the dead owner. Inside :func:`signals_raise` they
raise :class:`RunInterrupted` in the main thread instead, like SIGINT raises
``KeyboardInterrupt``, so the runner marks its rows interrupted and stops its workers. SIGKILL
cannot be caught; that case is left to the owner check of :mod:`trainleak.audit._owner`.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class RunInterrupted(BaseException):  # noqa: N818 - named like KeyboardInterrupt
    """A termination signal arrived; ``signum`` is its number.

    A ``BaseException``, like ``KeyboardInterrupt``, so that ``except Exception`` in
    experiment code does not swallow it.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


def _raise(signum: int, frame: FrameType | None) -> None:
    raise RunInterrupted(signum)


def _catchable() -> list[signal.Signals]:
    return [signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]


@contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`RunInterrupted` (main thread only;
    elsewhere the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise) for s in _catchable()}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def interrupt_reason(exc: BaseException) -> str:
    """The text stored for a run stopped by ``exc`` (a signal or Ctrl-C)."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted by SIGINT (Ctrl-C)"
    return str(exc)
