"""Who owns a running row of the store, and whether that owner is still alive.

A ``running`` row records its owner: the host name, the process id and the process's start
time (from ``/proc/<pid>/stat``, so a recycled process id is not mistaken for the owner), and a
heartbeat (Unix time) that the owner refreshes every :func:`heartbeat_interval` seconds. When
the store is next opened, a running row is taken as interrupted when its owner is on this host
and no longer exists (or is a zombie), or when its heartbeat is older than
:func:`stale_after` seconds (the only test possible for an owner on another host).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

_INTERVAL_ENV = "TRAINLEAK_HEARTBEAT_SECONDS"


def heartbeat_interval() -> float:
    """Seconds between heartbeats: ``$TRAINLEAK_HEARTBEAT_SECONDS`` or 10."""
    try:
        value = float(os.environ.get(_INTERVAL_ENV, "10"))
    except ValueError:
        value = 10.0
    return value if value > 0 else 10.0


def stale_after() -> float:
    """Seconds without a heartbeat after which a running row counts as interrupted."""
    return max(12.0 * heartbeat_interval(), 30.0)


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start time)`` of process ``pid`` from ``/proc``, or None if unreadable."""
    try:
        text = open(f"/proc/{pid}/stat", encoding="ascii", errors="replace").read()  # noqa: SIM115
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the command name may contain spaces
    return (fields[0], fields[19]) if len(fields) > 19 else None


def process_start(pid: int) -> str:
    """A token that changes when ``pid`` is recycled: its start time, or "" without /proc."""
    stat = _proc_stat(pid)
    return stat[1] if stat else ""


@dataclass(frozen=True)
class Owner:
    """The process that owns a running row."""

    host: str
    pid: int
    start: str

    @classmethod
    def current(cls) -> Owner:
        """This process."""
        return cls(socket.gethostname(), os.getpid(), process_start(os.getpid()))

    def alive(self) -> bool | None:
        """True or False for an owner on this host; None (unknown) for one on another host."""
        if self.host != socket.gethostname():
            return None
        return pid_alive(self.pid, self.start)


def pid_alive(pid: int, start: str = "") -> bool:
    """Whether process ``pid`` exists, is not a zombie and (if given) has start time ``start``."""
    if pid <= 0:
        return False
    stat = _proc_stat(pid)
    if stat is not None:
        state, started = stat
        return state not in ("Z", "X", "x") and (not start or started == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not os.path.isdir("/proc") or os.path.exists(f"/proc/{pid}")


def owner_is_gone(host: str | None, pid: int | None, start: str | None, beat: float | None) -> bool:
    """Whether the owner of a running row has gone (see the module docstring).

    A row without any owner information (written by an older trainleak) counts as gone.
    """
    if host is None or pid is None:
        return True
    if beat is not None and time.time() - beat > stale_after():
        return True
    return Owner(host, pid, start or "").alive() is False


class Heartbeat:
    """A daemon thread calling ``beat()`` every :func:`heartbeat_interval` seconds.

    Used as a context manager around the work; errors of ``beat`` (e.g. a store briefly
    locked) are ignored, the next beat tries again.
    """

    def __init__(self, beat: Callable[[], None], interval: float | None = None) -> None:
        self._beat, self._interval = beat, interval or heartbeat_interval()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="trainleak-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            with contextlib.suppress(Exception):  # a missed beat is retried at the next one
                self._beat()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
