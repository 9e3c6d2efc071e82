"""Shared test configuration: real data from ../shared/data unless TRAINLEAK_DATA says otherwise."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("TRAINLEAK_DATA", str(REPO.parent / "shared" / "data"))
# One intra-op thread per test process: the suite runs on two pytest-xdist workers, and two
# threads per worker oversubscribe a two-core machine (tiny ops then slow down many times).
torch.set_num_threads(1)


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_module(module: str, how: str) -> Any:
    """Import ``module``, or fail under CI (``CI=true``: .ci/run installs it) and skip with the
    reason elsewhere."""
    try:
        return importlib.import_module(module)
    except ImportError:
        reason = f"{module} is not installed ({how})"
        if _ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)


def require_program(name: str, how: str) -> str:
    """The path of program ``name``, or fail under CI and skip with the reason elsewhere."""
    found = shutil.which(name)
    if found:
        return found
    reason = f"{name} is not on PATH ({how})"
    if _ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def require_data(path: Path, what: str = "real data") -> Path:
    """Return ``path`` if it exists. Otherwise fail under CI (``CI=true``: the real data must be
    there), and skip with the reason elsewhere (printed in the summary: addopts has ``-rs``)."""
    if path.exists():
        return path
    reason = (
        f"{what} not found at {path} (set TRAINLEAK_DATA, or put ../shared/data beside the repo)"
    )
    if _ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data root: a failure in CI, a skip with a reason elsewhere, when absent."""
    return require_data(Path(os.environ["TRAINLEAK_DATA"]))


def require_package(package: str, how: str) -> None:
    """Check that ``package`` is installed without importing it (some model packages import
    heavy runtimes they do not need); fail under CI and skip with the reason elsewhere."""
    import importlib.util

    if importlib.util.find_spec(package) is None:
        reason = f"{package} is not installed ({how})"
        if _ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
