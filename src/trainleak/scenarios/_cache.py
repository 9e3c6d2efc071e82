"""Where scenarios cache what they train (shadow banks, priors, targets)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root(sub: str) -> Path:
    """``$TRAINLEAK_CACHE/<sub>``, else ``~/.cache/trainleak/<sub>``."""
    root = os.environ.get("TRAINLEAK_CACHE") or str(Path.home() / ".cache" / "trainleak")
    return Path(root) / sub
