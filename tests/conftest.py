"""Shared test configuration: real data from ../shared/data unless TRAINLEAK_DATA says otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("TRAINLEAK_DATA", str(REPO.parent / "shared" / "data"))
# One intra-op thread per test process: the suite runs on two pytest-xdist workers, and two
# threads per worker oversubscribe a two-core machine (tiny ops then slow down many times).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data root; tests needing it skip with a reason when it is absent."""
    path = Path(os.environ["TRAINLEAK_DATA"])
    if not path.is_dir():
        pytest.skip(f"real data not found at {path} (set TRAINLEAK_DATA)")
    return path
