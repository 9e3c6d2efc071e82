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


def require_data(path: Path, what: str = "real data") -> Path:
    """Return ``path`` if it exists. Otherwise fail under CI (``CI=true``: the real data must be
    there), and skip with the reason elsewhere (printed in the summary: addopts has ``-rs``)."""
    if path.exists():
        return path
    reason = (
        f"{what} not found at {path} (set TRAINLEAK_DATA, or put ../shared/data beside the repo)"
    )
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data root: a failure in CI, a skip with a reason elsewhere, when absent."""
    return require_data(Path(os.environ["TRAINLEAK_DATA"]))
