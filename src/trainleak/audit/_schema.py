"""The store's SQLite schema: creating it, recognising it, and migrating older versions.

A trainleak store carries ``PRAGMA application_id`` :data:`APPLICATION_ID` and ``PRAGMA
user_version`` :data:`VERSION`. Version 1 (trainleak 0.1, no application id, a ``runs`` table
without owners) is migrated in place when a store is opened for writing, and read as it is
when opened read-only. Anything else (another program's database, a store written by a newer
trainleak, a file that is not SQLite) is refused with :class:`~trainleak.errors.StoreError`.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path

from trainleak.errors import StoreError

APPLICATION_ID = 0x546C6B53  # "TlkS"
VERSION = 2

_V1_COLUMNS = {
    "id",
    "experiment",
    "config_json",
    "config_hash",
    "status",
    "metrics_json",
    "claims_json",
    "artifacts_json",
    "out_dir",
    "error",
    "started",
    "finished",
}

_RUNS = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment TEXT NOT NULL,
    config_json TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
    metrics_json TEXT,
    claims_json TEXT,
    artifacts_json TEXT,
    out_dir TEXT,
    error TEXT,
    started TEXT NOT NULL,
    finished TEXT,
    point INTEGER NOT NULL DEFAULT 0,
    owner_host TEXT,
    owner_pid INTEGER,
    owner_start TEXT,
    heartbeat REAL
)"""

_INDEXES = """
CREATE INDEX runs_lookup ON runs (experiment, config_hash, status);
CREATE UNIQUE INDEX runs_one_claim ON runs (experiment, config_hash)
    WHERE point = 1 AND status IN ('running', 'done');
CREATE UNIQUE INDEX runs_own_folder ON runs (out_dir)
    WHERE out_dir IS NOT NULL AND owner_host IS NOT NULL;
"""

_V1_NOTE = (
    "recorded by trainleak store schema 1, which kept no owner process; "
    "marked interrupted when the store was migrated to schema 2"
)


def _pragma(con: sqlite3.Connection, name: str) -> int:
    return int(con.execute(f"PRAGMA {name}").fetchone()[0])


def _tables(con: sqlite3.Connection) -> set[str]:
    rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {r[0] for r in rows if not r[0].startswith("sqlite_")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def schema_version(con: sqlite3.Connection, path: Path) -> int:
    """The store version of an open database: 0 (empty), 1 or :data:`VERSION`.

    The application id, the user version and the tables are read in one read transaction
    (unless the caller already holds one), so another process that creates the store at the
    same moment is seen either wholly or not at all: read one statement at a time, a reader
    could see the empty header and then the new table, which is no trainleak store.

    Raises:
        StoreError: the database is not a trainleak store, or one of a newer version.
    """
    own = not con.in_transaction
    try:
        if own:
            con.execute("BEGIN")  # deferred: the first read takes the shared lock, kept to the end
        app, version = _pragma(con, "application_id"), _pragma(con, "user_version")
        tables = _tables(con)
        columns = _columns(con, "runs") if "runs" in tables else set()
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK":
            raise HotJournalError(str(exc)) from exc
        raise StoreError(f"{str(path)!r} is not a trainleak store: {exc}") from None
    finally:
        if own and con.in_transaction:
            con.rollback()
    if app == APPLICATION_ID:
        if version > VERSION:
            raise StoreError(
                f"{str(path)!r} is a trainleak store of schema {version}, newer than this "
                f"trainleak reads ({VERSION}); upgrade trainleak"
            )
        if version == VERSION and "runs" in tables:
            return VERSION
    elif app == 0 and not tables:
        return 0
    elif app == 0 and tables == {"runs"} and columns == _V1_COLUMNS:
        return 1
    raise StoreError(
        f"{str(path)!r} is an SQLite database but not a trainleak store "
        f"(application id {app:#x}, tables {sorted(tables)}); refusing to use it"
    )


def create(con: sqlite3.Connection) -> None:
    """Create the current schema in an empty database (inside the caller's transaction)."""
    con.execute(_RUNS)
    for statement in _INDEXES.split(";"):
        if statement.strip():
            con.execute(statement)
    con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    con.execute(f"PRAGMA user_version = {VERSION}")


def migrate_v1(con: sqlite3.Connection) -> None:
    """Rebuild a schema-1 ``runs`` table as schema 2 (inside the caller's transaction).

    Rows keep their ids and data. Schema 1 kept no owner, so its ``running`` rows cannot be
    told from interrupted ones: they become ``interrupted`` with a note in ``error``.
    """
    con.execute("ALTER TABLE runs RENAME TO runs_v1")
    con.execute("DROP INDEX IF EXISTS runs_lookup")  # schema 1's index moved with the table
    create(con)
    cols = ", ".join(sorted(_V1_COLUMNS - {"status", "error"}))
    con.execute(
        f"INSERT INTO runs ({cols}, status, error) SELECT {cols}, "
        "CASE status WHEN 'running' THEN 'interrupted' ELSE status END, "
        "CASE status WHEN 'running' THEN ? ELSE error END FROM runs_v1",
        (_V1_NOTE,),
    )
    con.execute("DROP TABLE runs_v1")


class HotJournalError(Exception):
    """The last writer was killed inside a transaction: only a writer can roll it back."""


def open_checked(
    path: Path, *, readonly: bool, timeout: float, name: Path | None = None
) -> tuple[sqlite3.Connection, int]:
    """Connect to ``path`` and return the connection and its schema version (0 when empty).

    A read-only connection never creates the file and never writes.

    Args:
        name: the store's own path, for messages (when ``path`` is a recovered copy).

    Raises:
        StoreError: not an SQLite file, not a trainleak store, or a newer schema.
        HotJournalError: (read-only) the file has a hot rollback journal (see
            :func:`recovered_copy`).
    """
    name = name or path
    if path.exists() and not _is_sqlite(path):
        raise StoreError(f"{str(name)!r} is not a trainleak store (not an SQLite database)")
    if readonly:
        if not path.is_file():
            raise StoreError(f"no trainleak store at {str(name)!r}")
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout)
    else:
        con = sqlite3.connect(path, timeout=timeout)
    try:
        return con, schema_version(con, name)
    except BaseException:
        con.close()
        raise


def recovered_copy(path: Path, folder: Path) -> Path:
    """Copy a store whose last writer was killed mid-transaction, with its hot journal, into
    ``folder`` and let SQLite roll the transaction back there; the original is left untouched
    (the next writer that opens it rolls it back the same way)."""
    copy = folder / path.name
    for suffix in ("", "-journal"):
        src = Path(f"{path}{suffix}")
        if src.exists():
            shutil.copyfile(src, f"{copy}{suffix}")
    with contextlib.closing(sqlite3.connect(copy)) as con:
        con.execute("PRAGMA quick_check").fetchall()  # the first read rolls the journal back
    return copy


def _is_sqlite(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        head = fh.read(16)
    return head == b"SQLite format 3\x00" or head == b""
