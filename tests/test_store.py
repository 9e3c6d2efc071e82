"""The result store: owners and interrupted runs, atomic claims, schema versions, read-only
opening, and one folder per run (reported with its own data only)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fault_helpers import NAME
from trainleak.audit import ResultStore, _schema, claim_folder, record_run, write_report
from trainleak.audit._owner import Heartbeat, Owner, pid_alive, process_start
from trainleak.audit._schema import APPLICATION_ID
from trainleak.errors import StoreError

V1_SCHEMA = """
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


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _set_owner(path: Path, run_id: int, host: str, pid: int, start: str, beat: float) -> None:
    with sqlite3.connect(path) as con:
        con.execute(
            "UPDATE runs SET owner_host=?, owner_pid=?, owner_start=?, heartbeat=? WHERE id=?",
            (host, pid, start, beat, run_id),
        )


# --- owners and interrupted runs -----------------------------------------------------------


def test_process_identity_tells_live_dead_and_recycled_pids() -> None:
    me = Owner.current()
    assert me.alive() is True and pid_alive(os.getpid(), process_start(os.getpid()))
    assert not pid_alive(_dead_pid())
    assert not pid_alive(os.getpid(), "1")  # same pid, another start time: a recycled pid
    assert Owner("some-other-host", os.getpid(), "").alive() is None  # unknown elsewhere


def test_run_of_a_dead_owner_is_interrupted_never_running(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = ResultStore(path)
    mine, dead, stale, elsewhere = (store.start("exp", {"k": k}) for k in range(4))
    host, now = Owner.current().host, time.time()
    _set_owner(path, dead, host, _dead_pid(), "", now)
    _set_owner(path, stale, host, os.getpid(), process_start(os.getpid()), now - 3600)
    _set_owner(path, elsewhere, "some-other-host", 1, "", now)  # fresh heartbeat: alive
    before = path.read_bytes()
    view = {r.id: r.status for r in ResultStore(path, readonly=True).rows()}
    assert view == {
        mine: "running",
        dead: "interrupted",
        stale: "interrupted",
        elsewhere: "running",
    }
    assert path.read_bytes() == before  # the read-only view changed nothing
    assert sorted(ResultStore(path).reap()) == []  # opening for writing already reaped them
    rows = {r.id: r for r in ResultStore(path).rows()}
    assert rows[dead].status == "interrupted" and "interrupted" in (rows[dead].error or "")
    assert rows[mine].status == "running"


def test_heartbeat_refreshes_only_this_processes_running_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = ResultStore(path)
    mine, other = store.start("exp", {"k": 1}), store.start("exp", {"k": 2})
    _set_owner(path, mine, Owner.current().host, os.getpid(), Owner.current().start, 0.0)
    _set_owner(path, other, "some-other-host", 1, "", 0.0)
    with Heartbeat(store.beat, interval=0.02):
        time.sleep(0.3)
    with sqlite3.connect(path) as con:
        beats = dict(con.execute("SELECT id, heartbeat FROM runs"))
    assert beats[mine] > time.time() - 5 and beats[other] == 0.0


# --- claims ---------------------------------------------------------------------------------


def test_claim_is_atomic_across_threads(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    ResultStore(path)
    won: list[int | None] = []
    barrier = threading.Barrier(8)

    def contend() -> None:
        store = ResultStore(path)
        barrier.wait()
        won.append(store.claim("exp", {"point": 1}))

    threads = [threading.Thread(target=contend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(w is not None for w in won) == 1


def test_claim_refuses_done_and_live_points_and_retakes_dead_ones(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = ResultStore(path)
    first = store.claim("exp", {"p": 1})
    assert first is not None and store.claim("exp", {"p": 1}) is None  # running, owner alive
    _set_owner(path, first, Owner.current().host, _dead_pid(), "", time.time())
    second = store.claim("exp", {"p": 1})  # the owner died: the point is free again
    assert second is not None and second != first
    store.finish(second, {"metrics": {}, "claims": [], "artifacts": {}})
    assert store.claim("exp", {"p": 1}) is None  # done
    con = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError), con:  # the index itself forbids a second claim
        con.execute(
            "INSERT INTO runs (experiment, config_json, config_hash, status, started, point)"
            " SELECT experiment, config_json, config_hash, 'running', started, 1 FROM runs"
            " WHERE id = ?",
            (second,),
        )
    con.close()
    statuses = [r.status for r in store.rows()]
    assert statuses == ["interrupted", "done"]


# --- schema versions and refusals ------------------------------------------------------------


def _v1_store(path: Path, out_dir: Path) -> None:
    with sqlite3.connect(path) as con:
        con.executescript(V1_SCHEMA)
        for status in ("done", "running"):
            con.execute(
                "INSERT INTO runs (experiment, config_json, config_hash, status, out_dir, started,"
                " metrics_json) VALUES ('exp', '{\"a\": 1}', 'h', ?, ?, 'then', '{\"m\": 2}')",
                (status, str(out_dir)),
            )


def test_schema_1_store_is_read_as_is_and_migrated_on_write(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _v1_store(path, tmp_path)
    before = path.read_bytes()
    seen = ResultStore(path, readonly=True).rows()
    assert [r.status for r in seen] == ["done", "interrupted"] and seen[0].metrics == {"m": 2}
    assert path.read_bytes() == before
    store = ResultStore(path)
    assert store.version == 2
    rows = store.rows()
    assert [(r.id, r.status) for r in rows] == [(1, "done"), (2, "interrupted")]
    assert "schema 1" in (rows[1].error or "") and rows[0].metrics == {"m": 2}
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert store.start("exp", {"a": 2}) == 3


def test_stores_that_are_not_trainleak_stores_are_refused_untouched(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database")
    newer = tmp_path / "newer.sqlite"
    ResultStore(newer)
    with sqlite3.connect(newer) as con:
        con.execute("PRAGMA user_version = 99")
    for path, message in (
        (other, "not a trainleak store"),
        (text, "not an SQLite database"),
        (newer, "newer than this trainleak"),
    ):
        before = path.read_bytes()
        for readonly in (True, False):
            with pytest.raises(StoreError, match=message):
                ResultStore(path, readonly=readonly)
        with pytest.raises(StoreError, match=message):
            write_report([path], tmp_path / "r.html")
        assert path.read_bytes() == before
    with pytest.raises(StoreError, match="no trainleak store"):
        ResultStore(tmp_path / "missing.sqlite", readonly=True)
    assert not (tmp_path / "missing.sqlite").exists()
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(StoreError, match="empty database"):
        write_report([empty], tmp_path / "r.html")
    assert empty.stat().st_size == 0


def test_read_only_store_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    run_id = ResultStore(path).start("exp", {})
    ro = ResultStore(path, readonly=True)
    with pytest.raises(StoreError, match="read-only"):
        ro.fail(run_id, "x")
    with pytest.raises(StoreError, match="read-only"):
        ro.start("exp", {})


# --- one folder per run, reported with its own data ------------------------------------------


def test_claim_folder_never_hands_out_a_taken_folder(tmp_path: Path) -> None:
    base = tmp_path / "out"
    first, second = claim_folder(base, 1), claim_folder(base, 2)
    assert (first, second) == (base, tmp_path / "out-2")
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "result.json").write_text("{}")  # a run of an earlier trainleak
    assert claim_folder(legacy, 3) == tmp_path / "legacy-2"
    assert json.loads((second / ".trainleak-run").read_text()) == {"run_id": 2}


def test_second_run_with_the_same_out_keeps_the_first(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    out = tmp_path / "runs" / "same"
    one = record_run(NAME, {"value": 1, "seconds": 0}, out, store_path=store)
    two = record_run(NAME, {"value": 2, "seconds": 0}, out, store_path=store)
    assert one.out_dir == out and two.out_dir == tmp_path / "runs" / "same-2"
    assert json.loads((out / "result.json").read_text())["metrics"]["value"] == 1
    rows = ResultStore(store).rows()
    assert [Path(r.out_dir or "") for r in rows] == [out.resolve(), two.out_dir.resolve()]
    # the user deletes the first folder and runs again: the freed name is taken, and the first
    # row (its metrics kept) lets go of the folder instead of blocking the run
    shutil.rmtree(out)
    three = record_run(NAME, {"value": 3, "seconds": 0}, out, store_path=store)
    assert three.out_dir == out
    rows = ResultStore(store).rows()
    assert [r.out_dir for r in rows] == [None, str(two.out_dir.resolve()), str(out.resolve())]
    assert [r.status for r in rows] == ["done"] * 3 and rows[0].metrics["value"] == 1
    page = write_report([store], tmp_path / "r.html").read_text()
    run1, run2 = page.split('<h2 id="run-1">')[:2]
    assert '<td>value</td><td class="num">1</td>' in run1
    assert '<td>value</td><td class="num">2</td>' in run2


def test_report_never_shows_another_runs_files(tmp_path: Path) -> None:
    """Schema-1 rows sharing one folder (the old overwrite fault) and a result.json naming
    another run: the report shows the store's data for those rows, not the folder's."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "result.json").write_text(
        json.dumps({"experiment": "exp", "config": {"a": 1}, "metrics": {"m": 999}})
    )
    path = tmp_path / "old.sqlite"
    _v1_store(path, folder)
    page = write_report([path], tmp_path / "r.html").read_text()
    assert "999" not in page and page.count("<td>m</td>") == 2  # each row: the store's metrics
    store = tmp_path / "s.sqlite"
    mine = ResultStore(store).start("exp", {"a": 1}, folder)
    ResultStore(store).finish(mine, {"metrics": {"m": 5}, "claims": [], "artifacts": {}})
    (folder / "result.json").write_text(json.dumps({"run_id": mine + 1, "metrics": {"m": 999}}))
    assert "999" not in write_report([store], tmp_path / "r2.html").read_text()


def test_report_never_embeds_files_outside_the_runs_folder(tmp_path: Path) -> None:
    done = record_run(NAME, {"value": 3, "seconds": 0}, tmp_path / "r", store_path=tmp_path / "s")
    secret = tmp_path / "secret.png"
    secret.write_bytes((done.out_dir / "images" / "grid.png").read_bytes() + b"SECRET")
    (done.out_dir / "images" / "link.png").symlink_to(secret)
    doc = json.loads((done.out_dir / "result.json").read_text())
    doc["artifacts"].update(
        {"images/up": "../secret.png", "images/abs": str(secret), "images/link": "images/link.png"}
    )
    (done.out_dir / "result.json").write_text(json.dumps(doc))
    for source in (done.out_dir, tmp_path / "s"):
        page = write_report([source], tmp_path / "r.html").read_text()
        assert page.count("<img ") == 1 and "grid" in page  # only the run's own image
        assert base64.b64encode(secret.read_bytes()).decode() not in page


KILLED_WRITER = """
import os, signal, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("PRAGMA cache_size = 5")  # spill pages into the file before the commit
con.execute("BEGIN IMMEDIATE")
con.executemany(
    "INSERT INTO runs (experiment, config_json, config_hash, status, started)"
    " VALUES ('ghost', ?, 'h', 'running', 'now')",
    [("x" * 200,) for _ in range(5000)],
)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_store_of_a_writer_killed_mid_transaction_reads_and_recovers(tmp_path: Path) -> None:
    """A writer killed inside a transaction leaves a hot journal, which a read-only reader
    cannot roll back (SQLITE_READONLY_ROLLBACK): the report reads a recovered copy, the next
    writer recovers the store itself."""
    path = tmp_path / "s.sqlite"
    store = ResultStore(path)
    kept = store.start("exp", {"k": 1})
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)])
    assert proc.returncode == -9
    journal = tmp_path / "s.sqlite-journal"
    assert journal.stat().st_size > 0
    before = (path.read_bytes(), journal.read_bytes())
    raw = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # the fault itself
        raw.execute("SELECT count(*) FROM runs").fetchall()
    raw.close()
    rows = ResultStore(path, readonly=True).rows()
    assert [r.id for r in rows] == [kept]  # the killed transaction is not seen
    assert "ghost" not in write_report([path], tmp_path / "r.html").read_text()
    assert (path.read_bytes(), journal.read_bytes()) == before  # the reader wrote nothing
    assert [r.id for r in ResultStore(path).rows()] == [kept]  # a writer rolls it back
    assert not journal.exists() or journal.stat().st_size == 0
    assert ResultStore(path).integrity_check() == "ok"


def test_schema_is_read_in_one_snapshot_while_another_process_creates_the_store(
    tmp_path: Path,
) -> None:
    """A reader that meets an empty file while another connection creates the store reads
    the header and the tables in one read transaction: the writer cannot commit between
    them (it times out and rolls back), and the reader sees an empty database, never the
    header of one and the tables of the other (which was a "not a trainleak store" error in
    concurrent runs sharing a new store)."""
    path = tmp_path / "trainleak.sqlite"
    sqlite3.connect(path).close()
    reader = sqlite3.connect(path, timeout=0.5)
    writer = sqlite3.connect(path, timeout=0.05)
    outcome: list[str] = []

    def between_reads(statement: str) -> None:
        if "user_version" in statement and not outcome:  # after application_id was read
            try:
                writer.execute("BEGIN IMMEDIATE")
                _schema.create(writer)
                writer.commit()
                outcome.append("committed")
            except sqlite3.OperationalError:
                writer.rollback()
                outcome.append("blocked")

    reader.set_trace_callback(between_reads)
    try:
        assert _schema.schema_version(reader, path) == 0
        assert outcome == ["blocked"]
        assert not reader.in_transaction  # the read transaction was closed
    finally:
        reader.close()
        writer.close()
    assert ResultStore(path).version == _schema.VERSION  # the store is then created as usual
