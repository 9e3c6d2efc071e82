"""The worker pool's progress: reported as each job ends, not once when all have."""

from __future__ import annotations

import time

from trainleak.parallel import pmap


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
