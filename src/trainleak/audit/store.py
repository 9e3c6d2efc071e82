"""The result store: one SQLite row per run, so a crashed grid loses nothing.

Every run is a row of table ``runs`` holding its experiment, config (JSON and a hash of it),
status (``running``, ``done``, ``failed`` or ``interrupted``), metrics, claims and artifact
paths (JSON), its own output folder, error text, UTC timestamps, and the process that owns it
while it runs (host, process id and start time, and a heartbeat; see
:mod:`trainleak.audit._owner`). A run whose owner died (any signal, a power cut) is marked
``interrupted`` when the store is next opened for writing, and shown as interrupted by a
read-only reader; it never stays ``running``.

Grid points are claimed atomically (:meth:`ResultStore.claim`): a unique index allows one
``running`` or ``done`` claim per experiment and config, so two audits on one store never run a
point twice. Each call opens its own short connection, so processes can share one store file.

Example:
    >>> import tempfile, pathlib
    >>> store = ResultStore(pathlib.Path(tempfile.mkdtemp()) / "runs.sqlite")
    >>> run_id = store.start("demo", {"seed": 0})
    >>> store.fail(run_id, "Traceback ...")
    >>> [(r.experiment, r.status) for r in store.rows()]
    [('demo', 'failed')]
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tempfile
import time
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainleak.audit import _schema
from trainleak.audit._owner import Owner, owner_is_gone
from trainleak.audit.serialize import dumps, to_jsonable
from trainleak.errors import StoreError

_TIMEOUT = 60.0


def config_hash(config: Mapping[str, Any]) -> str:
    """A stable hash of a config: SHA-256 of its canonical JSON (sorted keys), 16 hex digits."""
    text = json.dumps(to_jsonable(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunRecord:
    """One row of the store, with its JSON columns parsed.

    ``status`` is ``interrupted`` for a row still marked running whose owner has gone, even
    when the store was opened read-only and the row itself is unchanged.
    """

    id: int
    experiment: str
    config: dict[str, Any]
    config_hash: str
    status: str
    metrics: dict[str, Any] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    out_dir: str | None = None
    error: str | None = None
    started: str = ""
    finished: str | None = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ResultStore:
    """Runs recorded in an SQLite file.

    Args:
        path: the database file. Opened for writing it is created on first use (parent folders
            included), an older schema is migrated, and rows of dead owners are marked
            interrupted.
        readonly: open an existing store without ever writing to it (for reports).

    Raises:
        StoreError: the file is not a trainleak store, is of a newer schema, or (read-only)
            does not exist or is empty.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path, self.readonly = Path(path), readonly
        self.owner = Owner.current()
        self._read_path = self.path  # read-only: a recovered copy after a killed writer
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        con, version = self._open()
        try:
            if readonly and version == 0:
                raise StoreError(f"{str(self.path)!r} is an empty database, not a trainleak store")
            self.version = version
            if not readonly and version != _schema.VERSION:
                self.version = self._upgrade(con)
        finally:
            con.close()
        if not readonly:
            self.reap()

    def _open(self) -> tuple[sqlite3.Connection, int]:
        try:
            return _schema.open_checked(
                self._read_path, readonly=self.readonly, timeout=_TIMEOUT, name=self.path
            )
        except _schema.HotJournalError:  # read-only, and the last writer died mid-transaction
            folder = Path(tempfile.mkdtemp(prefix="trainleak-store-"))
            weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
            self._read_path = _schema.recovered_copy(self.path, folder)
            return _schema.open_checked(
                self._read_path, readonly=True, timeout=_TIMEOUT, name=self.path
            )

    def _upgrade(self, con: sqlite3.Connection) -> int:
        con.execute("BEGIN IMMEDIATE")
        try:
            version = _schema.schema_version(con, self.path)  # again, under the write lock
            if version == 0:
                _schema.create(con)
            elif version == 1:
                _schema.migrate_v1(con)
            con.commit()
        except BaseException:
            con.rollback()
            raise
        return _schema.VERSION

    def __repr__(self) -> str:
        return f"ResultStore({str(self.path)!r})"

    @contextmanager
    def _connect(self, *, immediate: bool = False) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            con, _ = self._open()
        else:
            con = sqlite3.connect(self.path, timeout=_TIMEOUT)
        con.row_factory = sqlite3.Row
        try:
            if immediate:
                con.execute("BEGIN IMMEDIATE")  # take the write lock before reading
            with con:  # commits, or rolls back on error
                yield con
        finally:
            con.close()

    def _write(self) -> None:
        if self.readonly:
            raise StoreError(f"{str(self.path)!r} was opened read-only")

    def _owner_values(self) -> tuple[str, int, str, float]:
        o = self.owner
        return o.host, o.pid, o.start, time.time()

    def start(
        self, experiment: str, config: Mapping[str, Any], out_dir: str | Path | None = None
    ) -> int:
        """Insert a ``running`` row owned by this process and return its id."""
        self._write()
        with self._connect() as con:
            return self._insert(con, experiment, config, out_dir, point=False)

    def _insert(
        self,
        con: sqlite3.Connection,
        experiment: str,
        config: Mapping[str, Any],
        out_dir: str | Path | None,
        *,
        point: bool,
    ) -> int:
        cur = con.execute(
            "INSERT INTO runs (experiment, config_json, config_hash, status, out_dir, started,"
            " point, owner_host, owner_pid, owner_start, heartbeat)"
            " VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
            (
                experiment,
                dumps(config),
                config_hash(config),
                _opt_str(out_dir),
                _now(),
                int(point),
                *self._owner_values(),
            ),
        )
        return int(cur.lastrowid or 0)

    def claim(self, experiment: str, config: Mapping[str, Any]) -> int | None:
        """Atomically claim a grid point: insert a ``running`` row unless one is done or running.

        Runs of dead owners are marked interrupted first (in the same transaction), so a point
        whose run was killed can be claimed again.

        Returns:
            The new row's id, or None when the point is done or another live process runs it.
        """
        self._write()
        digest = config_hash(config)
        with self._connect(immediate=True) as con:
            self._reap(con)
            taken = con.execute(
                "SELECT 1 FROM runs WHERE experiment = ? AND config_hash = ?"
                " AND (status = 'done' OR (status = 'running' AND point = 1)) LIMIT 1",
                (experiment, digest),
            ).fetchone()
            if taken is not None:
                return None
            return self._insert(con, experiment, config, None, point=True)

    def set_out_dir(self, run_id: int, out_dir: str | Path) -> None:
        """Record the run's own folder, freshly taken by ``claim_folder`` (its marker file
        created by this run). An earlier run that no longer runs and still names the folder
        had its folder deleted (a folder holding an earlier run's marker or ``result.json``
        is never taken again), so that row lets go of it: its ``out_dir`` becomes empty, the
        rest of the row (status, metrics, claims) stays."""
        self._write()
        with self._connect(immediate=True) as con:
            con.execute(
                "UPDATE runs SET out_dir = NULL WHERE out_dir = ? AND id != ?"
                " AND status != 'running'",
                (str(out_dir), run_id),
            )
        self._update(run_id, {"out_dir": str(out_dir)}, settle=False)

    def finish(self, run_id: int, result: Any) -> None:
        """Mark run ``run_id`` done with the metrics, claims and artifacts of ``result``.

        ``result`` is a :class:`~trainleak.experiments.Result` or a ``result.json`` document.
        A grid point that another audit completed in the meantime (possible only after this
        run was taken for dead) stays ``interrupted``, with the reason.
        """
        get = result.get if isinstance(result, Mapping) else lambda k: getattr(result, k)
        columns = {
            "status": "done",
            "metrics_json": dumps(get("metrics")),
            "claims_json": dumps(get("claims")),
            "artifacts_json": dumps(get("artifacts")),
        }
        try:
            self._update(run_id, columns)
        except sqlite3.IntegrityError:
            self.interrupt(run_id, _LATE)

    def fail(self, run_id: int, error_text: str) -> None:
        """Mark run ``run_id`` failed and keep ``error_text`` (e.g. the traceback)."""
        self._update(run_id, {"status": "failed", "error": error_text})

    def interrupt(self, run_id: int, reason: str) -> None:
        """Mark run ``run_id`` interrupted (a signal, a dead worker) with ``reason``."""
        self._update(run_id, {"status": "interrupted", "error": reason})

    def _update(self, run_id: int, columns: dict[str, str], *, settle: bool = True) -> None:
        """Set ``columns`` of a row that is running (or was taken for dead: interrupted)."""
        self._write()
        if settle:
            columns = {**columns, "finished": _now()}
        names = ", ".join(f"{k} = ?" for k in columns)  # keys are fixed column names above
        with self._connect() as con:
            cur = con.execute(
                f"UPDATE runs SET {names} WHERE id = ? AND status IN ('running', 'interrupted')",
                (*columns.values(), run_id),
            )
            if cur.rowcount != 1:
                raise KeyError(f"no running run with id {run_id} in {self.path}")

    def beat(self) -> None:
        """Refresh the heartbeat of every running row this process owns."""
        host, pid, start, now = self._owner_values()
        with self._connect() as con:
            con.execute(
                "UPDATE runs SET heartbeat = ? WHERE status = 'running' AND owner_host = ?"
                " AND owner_pid = ? AND owner_start = ?",
                (now, host, pid, start),
            )

    def reap(self) -> list[int]:
        """Mark every running row whose owner has gone as interrupted; return their ids."""
        self._write()
        with self._connect(immediate=True) as con:
            return self._reap(con)

    def _reap(self, con: sqlite3.Connection) -> list[int]:
        gone = [r["id"] for r in con.execute(_RUNNING) if _gone(r)]
        for run_id in gone:
            con.execute(
                "UPDATE runs SET status = 'interrupted', finished = ?, error = ? WHERE id = ?",
                (_now(), _gone_text(), run_id),
            )
        return gone

    def rows(self, experiment: str | None = None) -> list[RunRecord]:
        """Every run (optionally of one experiment), oldest first."""
        query, args = "SELECT * FROM runs", tuple[str, ...]()
        if experiment is not None:
            query, args = query + " WHERE experiment = ?", (experiment,)
        with self._connect() as con:
            return [_record(r) for r in con.execute(query + " ORDER BY id", args)]

    def find_done(self, experiment: str, config_hash: str) -> RunRecord | None:
        """The latest finished run of ``experiment`` with this config hash, if any."""
        with self._connect() as con:
            row = con.execute(
                "SELECT * FROM runs WHERE experiment = ? AND config_hash = ? AND status = 'done'"
                " ORDER BY id DESC LIMIT 1",
                (experiment, config_hash),
            ).fetchone()
        return None if row is None else _record(row)

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` ("ok" for a sound file)."""
        with self._connect() as con:
            return "; ".join(str(r[0]) for r in con.execute("PRAGMA integrity_check"))


_LATE = (
    "finished after it had been taken for dead and another run completed the same grid point; "
    "its files are kept in its folder, the other run's result counts"
)

_RUNNING = (
    "SELECT id, owner_host, owner_pid, owner_start, heartbeat FROM runs WHERE status = 'running'"
)


def _get(row: sqlite3.Row, key: str) -> Any:
    return row[key] if key in row.keys() else None  # noqa: SIM118 - a Row has no __contains__


def _gone(row: sqlite3.Row) -> bool:
    return owner_is_gone(
        _get(row, "owner_host"),
        _get(row, "owner_pid"),
        _get(row, "owner_start"),
        _get(row, "heartbeat"),
    )


def _gone_text() -> str:
    return (
        "interrupted: the process running it ended without recording a result (killed by a "
        "signal, crashed, or its heartbeat stopped); found when the store was next opened"
    )


def _opt_str(value: str | Path | None) -> str | None:
    return None if value is None else str(value)


def _load(text: str | None, default: Any) -> Any:
    return default if text is None else json.loads(text)


def _record(row: sqlite3.Row) -> RunRecord:
    status, error = row["status"], row["error"]
    if status == "running" and _gone(row):
        status, error = "interrupted", error or _gone_text()
    return RunRecord(
        id=row["id"],
        experiment=row["experiment"],
        config=_load(row["config_json"], {}),
        config_hash=row["config_hash"],
        status=status,
        metrics=_load(row["metrics_json"], {}),
        claims=_load(row["claims_json"], []),
        artifacts=_load(row["artifacts_json"], {}),
        out_dir=row["out_dir"],
        error=error,
        started=row["started"],
        finished=row["finished"],
    )


def is_sqlite_file(path: Path) -> bool:
    """Whether ``path`` is an SQLite database file (checks the 16-byte header)."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"
