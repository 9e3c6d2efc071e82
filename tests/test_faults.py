"""Fault tests: audits killed at random points and resumed, concurrent audits and runs on one
store, and runs sharing one ``--out``.

Each audit or run is a real process (``fault_main.py``) in its own session, killed with real
signals. After every kill: no process of the audit's session survives (the orphan check reads
``/proc``), and ``PRAGMA integrity_check`` is ok. After the resume: every grid point is done
exactly once, no row is still running, no row belongs to anything but a grid point, and every
done row's folder holds that run's own result.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from fault_helpers import NAME, command, grid_text, script_env
from trainleak.audit import ResultStore, expand_grid
from trainleak.audit._pool import WorkerPool

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def _stat(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()  # state, ppid, pgrp, session, ...


def _procs() -> Iterator[tuple[int, list[str]]]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(entry)
            if fields is not None and fields[0] not in ("Z", "X"):
                yield int(entry), fields


def session_alive(sid: int) -> list[int]:
    """Live (non-zombie) processes of session ``sid``: the audit and everything it started."""
    return [pid for pid, f in _procs() if int(f[3]) == sid]


def workers_of(pid: int) -> list[int]:
    """The audit's worker processes (its spawned children, not the resource tracker)."""
    found = []
    for child, f in _procs():
        if int(f[1]) == pid:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"spawn_main" in cmdline:
                found.append(child)
    return found


def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.03)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def query(store: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    if not store.exists():
        return []
    con = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # the store is being created
        return []
    finally:
        con.close()


def start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command(*args),
        env=script_env(),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes], timeout: float = 120) -> tuple[int, str]:
    """Wait for ``proc``, check that nothing of its session is left; return code and output."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    wait_for(lambda: not session_alive(proc.pid), 10, f"the processes of audit {proc.pid} to end")
    return int(proc.returncode), (stdout + stderr).decode(errors="replace")


def integrity(store: Path) -> str:
    """``PRAGMA integrity_check`` as the next writer sees the store (a journal left by a
    killed writer is rolled back first, as any writer does)."""
    return ResultStore(store).integrity_check()


def running_rows(store: Path, owner: int) -> int:
    rows = query(store, "SELECT count(*) FROM runs WHERE status='running' AND owner_pid=?", owner)
    return int(rows[0][0]) if rows else 0


def done_rows(store: Path) -> int:
    rows = query(store, "SELECT count(*) FROM runs WHERE status = 'done'")
    return int(rows[0][0]) if rows else 0


def one_round(grid: Path, out: Path, kind: str, rng: random.Random) -> tuple[int, str]:
    """Start an audit, let it work, then kill it as ``kind`` says; return its exit code."""
    store = out / "trainleak.sqlite"
    proc = start("audit", str(grid), str(out), "2")
    try:
        wait_for(lambda: running_rows(store, proc.pid) > 0, 60, "the audit to claim a point")
        time.sleep(rng.uniform(0.0, 1.2))
        if kind == "kill-worker":
            victims = workers_of(proc.pid)
            assert victims, "the audit has no worker to kill"
            before = done_rows(store)
            os.kill(rng.choice(victims), signal.SIGKILL)
            # the audit goes on with a fresh worker: another point gets done, then it dies too
            wait_for(lambda: done_rows(store) > before + 1, 60, "the audit to go on")
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL if kind == "kill-parent" else signal.SIGTERM)
        return finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def check_exactly_once(grid: Path, out: Path) -> list[str]:
    """The resumed store holds each point done exactly once, and nothing else; returns the
    statuses of all rows."""
    store = out / "trainleak.sqlite"
    points = {j.config_hash for j in expand_grid(yaml.safe_load(grid.read_text()), out)}
    rows = ResultStore(store, readonly=True).rows()
    assert {r.config_hash for r in rows} <= points  # no row that is not a grid point
    done = Counter(r.config_hash for r in rows if r.status == "done")
    assert set(done) == points and set(done.values()) == {1}
    assert {r.status for r in rows} <= {"done", "interrupted"}
    folders = [r.out_dir for r in rows if r.out_dir]
    assert len(folders) == len(set(folders))  # one folder per run
    ids = {r.id for r in rows}
    for r in rows:
        if r.status == "done":
            doc = json.loads((Path(r.out_dir or "") / "result.json").read_text())
            assert doc["run_id"] == r.id and doc["metrics"]["value"] == r.config["value"]
    for marker in out.glob("*/.trainleak-run"):  # every folder belongs to a row of the store
        assert json.loads(marker.read_text())["run_id"] in ids
    assert integrity(store) == "ok"
    return [r.status for r in rows]


def kill_and_resume(tmp_path: Path, rounds: int, points: int, seed: int) -> None:
    grid, out = tmp_path / "grid.yaml", tmp_path / "audit"
    grid.write_text(grid_text(points, 0.1))
    rng = random.Random(seed)
    kinds = ["kill-parent", "kill-worker", "term-parent"]
    for i in range(rounds):
        kind = kinds[i % 3]
        code, output = one_round(grid, out, kind, rng)
        expected = {"kill-parent": -9, "kill-worker": -9, "term-parent": 143}[kind]
        assert code == expected, f"{kind}: exit code {code}\n{output}"
        assert integrity(out / "trainleak.sqlite") == "ok"
    assert done_rows(out / "trainleak.sqlite") < points  # the kills left work to resume
    code, output = finish(start("audit", str(grid), str(out), "4"))
    assert code == 0, output
    statuses = check_exactly_once(grid, out)
    assert statuses.count("interrupted") >= rounds // 2  # the kills landed mid-run


def test_audit_killed_ten_times_at_random_then_resumed(tmp_path: Path) -> None:
    kill_and_resume(tmp_path, rounds=10, points=240, seed=17)


@pytest.mark.slow
def test_audit_killed_thirty_times_at_random_then_resumed(tmp_path: Path) -> None:
    kill_and_resume(tmp_path, rounds=30, points=500, seed=23)


def test_two_audits_on_one_store_share_the_points(tmp_path: Path) -> None:
    grid, out = tmp_path / "grid.yaml", tmp_path / "audit"
    grid.write_text(grid_text(20, 0.25))
    store = out / "trainleak.sqlite"
    first = start("audit", str(grid), str(out), "2")
    wait_for(lambda: running_rows(store, first.pid) > 0, 60, "the first audit to start")
    second = start("audit", str(grid), str(out), "2")
    assert finish(first)[0] == 0 and finish(second)[0] == 0
    check_exactly_once(grid, out)
    owners = dict(query(store, "SELECT owner_pid, count(*) FROM runs GROUP BY owner_pid"))
    assert set(owners) == {first.pid, second.pid}  # both did part of the grid


def test_runs_sharing_out_and_store_with_an_audit_keep_their_own_folders(tmp_path: Path) -> None:
    grid, out = tmp_path / "grid.yaml", tmp_path / "audit"
    grid.write_text(grid_text(8, 0.2))
    store, shared = out / "trainleak.sqlite", out / "shared-run"
    audit = start("audit", str(grid), str(out), "2")
    runs = [start("run", str(shared), str(store), str(100 + k)) for k in range(3)]
    assert finish(audit)[0] == 0
    printed = []
    for proc in runs:
        code, output = finish(proc)
        assert code == 0, output
        printed.append(Path(output.strip().splitlines()[-1]))
    assert sorted(p.name for p in printed) == ["shared-run", "shared-run-2", "shared-run-3"]
    rows = ResultStore(store, readonly=True).rows()
    singles = [r for r in rows if r.config["value"] >= 100]
    assert len(singles) == 3 and all(r.status == "done" for r in singles)
    for r in singles:
        doc = json.loads((Path(r.out_dir or "") / "result.json").read_text())
        assert doc["run_id"] == r.id and doc["metrics"]["value"] == r.config["value"]
    assert len(rows) == 11 and integrity(store) == "ok"


def test_point_whose_worker_died_before_receiving_it_goes_to_the_next(tmp_path: Path) -> None:
    pool = WorkerPool(1, ["fault_helpers"])
    try:
        (first,) = pool.idle()
        first.process.kill()
        first.process.join()
        task = (NAME, {"value": 4, "seconds": 0}, str(tmp_path), 7)
        assert not pool.submit(first, "job", task)  # dead: dropped, not an error
        (second,) = pool.idle()
        assert second is not first and pool.submit(second, "job", task)
        ((worker, job, reply),) = pool.wait()
        assert (worker, job) == (second, "job") and reply is not None and reply[0] == "done"
        assert reply[1]["metrics"]["value"] == 4
        assert json.loads((tmp_path / "result.json").read_text())["run_id"] == 7
    finally:
        pool.close(kill=True)
