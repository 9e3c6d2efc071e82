"""The worker pool's progress: reported as each job ends, not once when all have."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from trainleak.parallel import one_thread, pmap, pmap_started


def test_progress_moves_as_each_job_ends() -> None:
    seen: list[tuple[float, int]] = []

    def progress(label: str, done: int, total: int) -> None:
        assert (label, total) == ("naps", 2)
        seen.append((time.perf_counter(), done))

    # time.sleep is importable by name in the spawned workers; one job ends at once, the
    # other three seconds later
    out = pmap(time.sleep, [0.0, 3.0], 2, progress, "naps")
    assert out == [None, None]
    assert [d for _, d in seen] == [1, 2]
    # the first report came when the short job ended, well before the long one did
    assert seen[1][0] - seen[0][0] > 1.5


def test_started_jobs_run_while_the_caller_works(tmp_path: Path) -> None:
    marks = [tmp_path / "a", tmp_path / "b"]
    with pmap_started(Path.touch, marks, 2) as collect:
        # the workers touch the files before anyone collects
        deadline = time.perf_counter() + 120
        while not all(m.exists() for m in marks) and time.perf_counter() < deadline:
            time.sleep(0.1)
        assert all(m.exists() for m in marks)
        assert collect(None, "marks") == [None, None]


def test_one_worker_starts_nothing_before_the_collect(tmp_path: Path) -> None:
    marks = [tmp_path / "a", tmp_path / "b"]
    with pmap_started(Path.touch, marks, 1) as collect:
        time.sleep(0.5)
        assert not any(m.exists() for m in marks)
        assert collect(None, "marks") == [None, None]
    assert all(m.exists() for m in marks)


def test_one_thread_holds_for_the_block_only() -> None:
    former = torch.get_num_threads()
    torch.set_num_threads(2)  # so that both the switch and the restore are visible
    try:
        before = torch.get_num_threads()
        with one_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == before
    finally:
        torch.set_num_threads(former)
