"""Property-based fuzzing of every parser of user input (the smoke run of ``make fuzz``).

Config parsing, ``--set`` values, grid files, IDX files, CIFAR-10 PNG sprites and python
batches, state-dict files, checkpoint and gradient-update folders: whatever hypothesis feeds
them, only trainleak's documented errors (``TrainleakError`` subclasses) may escape. Forty
seeded cases per target here (360 in all); ``make fuzz`` runs at least 10,000.
"""

from __future__ import annotations

import pytest

from fuzz_runner import run_target
from fuzz_targets import TARGETS


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_only_trainleak_errors_escape(target: str) -> None:
    outcome = run_target(target, max_examples=40, seed=1)
    assert outcome.failure is None, outcome.failure
    assert outcome.cases >= 40
