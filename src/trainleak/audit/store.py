"""The result store: one SQLite row per run, so a crashed grid loses nothing.

Every run is a row of table ``runs`` holding its experiment, config (JSON and a hash of it),
status (``running``, ``done`` or ``failed``), metrics, claims and artifact paths (JSON), output
directory, error text and UTC timestamps. Each call opens its own short connection, so worker
processes can share one store file.

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
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainleak.audit.serialize import dumps, to_jsonable
from trainleak.experiments.base import Result

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment TEXT NOT NULL,
    config_json TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
    metrics_json TEXT,
    claims_json TEXT,
    artifacts_json TEXT,
    out_dir TEXT,
    error TEXT,
    started TEXT NOT NULL,
    finished TEXT
);
CREATE INDEX IF NOT EXISTS runs_lookup ON runs (experiment, config_hash, status);
"""


def config_hash(config: Mapping[str, Any]) -> str:
    """A stable hash of a config: SHA-256 of its canonical JSON (sorted keys), 16 hex digits."""
    text = json.dumps(to_jsonable(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunRecord:
    """One row of the store, with its JSON columns parsed."""

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
    """Runs recorded in an SQLite file (created on first use, parent folders included).

    Args:
        path: the database file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.executescript(_SCHEMA)

    def __repr__(self) -> str:
        return f"ResultStore({str(self.path)!r})"

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=60.0)
        try:
            with con:  # commits, or rolls back on error
                yield con
        finally:
            con.close()

    def start(
        self, experiment: str, config: Mapping[str, Any], out_dir: str | Path | None = None
    ) -> int:
        """Insert a ``running`` row and return its id."""
        with self._connect() as con:
            cur = con.execute(
                "INSERT INTO runs (experiment, config_json, config_hash, status, out_dir, started)"
                " VALUES (?, ?, ?, 'running', ?, ?)",
                (experiment, dumps(config), config_hash(config), _opt_str(out_dir), _now()),
            )
            return int(cur.lastrowid or 0)

    def finish(self, run_id: int, result: Result) -> None:
        """Mark run ``run_id`` done and record the result's metrics, claims and artifacts."""
        self._update(
            run_id,
            status="done",
            metrics_json=dumps(result.metrics),
            claims_json=dumps(result.claims),
            artifacts_json=dumps(result.artifacts),
        )

    def fail(self, run_id: int, error_text: str) -> None:
        """Mark run ``run_id`` failed and keep ``error_text`` (e.g. the traceback)."""
        self._update(run_id, status="failed", error=error_text)

    def _update(self, run_id: int, **columns: str) -> None:
        columns["finished"] = _now()
        names = ", ".join(f"{k} = ?" for k in columns)  # keys are fixed column names above
        with self._connect() as con:
            cur = con.execute(f"UPDATE runs SET {names} WHERE id = ?", (*columns.values(), run_id))
            if cur.rowcount != 1:
                raise KeyError(f"no run with id {run_id} in {self.path}")

    def rows(self, experiment: str | None = None) -> list[RunRecord]:
        """Every run (optionally of one experiment), oldest first."""
        query, args = "SELECT * FROM runs", tuple[str, ...]()
        if experiment is not None:
            query, args = query + " WHERE experiment = ?", (experiment,)
        with self._connect() as con:
            con.row_factory = sqlite3.Row
            return [_record(r) for r in con.execute(query + " ORDER BY id", args)]

    def find_done(self, experiment: str, config_hash: str) -> RunRecord | None:
        """The latest finished run of ``experiment`` with this config hash, if any."""
        with self._connect() as con:
            con.row_factory = sqlite3.Row
            row = con.execute(
                "SELECT * FROM runs WHERE experiment = ? AND config_hash = ? AND status = 'done'"
                " ORDER BY id DESC LIMIT 1",
                (experiment, config_hash),
            ).fetchone()
        return None if row is None else _record(row)


def _opt_str(value: str | Path | None) -> str | None:
    return None if value is None else str(value)


def _load(text: str | None, default: Any) -> Any:
    return default if text is None else json.loads(text)


def _record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        experiment=row["experiment"],
        config=_load(row["config_json"], {}),
        config_hash=row["config_hash"],
        status=row["status"],
        metrics=_load(row["metrics_json"], {}),
        claims=_load(row["claims_json"], []),
        artifacts=_load(row["artifacts_json"], {}),
        out_dir=row["out_dir"],
        error=row["error"],
        started=row["started"],
        finished=row["finished"],
    )


def is_sqlite_file(path: Path) -> bool:
    """Whether ``path`` is an SQLite database file (checks the 16-byte header)."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"
