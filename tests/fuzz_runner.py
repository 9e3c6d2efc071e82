"""Running one fuzz target (see :mod:`fuzz_targets`) and reporting what it found."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

import hypothesis

from fuzz_targets import TARGETS


def _describe(exc: BaseException) -> str:
    """The error's type and message, and the (shrunk) example that raised it."""
    head = traceback.format_exception_only(type(exc), exc)[-1].strip()
    example = next((n for n in getattr(exc, "__notes__", []) if "Failing" in n), "")
    return f"{head}\n{example.strip()}".strip()


@dataclass(frozen=True)
class FuzzOutcome:
    """What a fuzz run of one target found: cases fed, and the first failure (if any)."""

    target: str
    cases: int
    failure: str | None


def run_target(name: str, max_examples: int, seed: int = 0) -> FuzzOutcome:
    """Feed ``max_examples`` drawn examples (seeded) of target ``name`` to its parser.

    A failure is an exception other than a TrainleakError; hypothesis shrinks it to a small
    example, which the failure text shows.
    """
    strategy, check = TARGETS[name]
    calls = 0

    @hypothesis.seed(seed)
    @hypothesis.settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
        print_blob=False,
    )
    @hypothesis.given(strategy)
    def fuzz(example: Any) -> None:
        nonlocal calls
        calls += 1
        check(example)

    try:
        fuzz()
    except Exception as exc:
        found = list(exc.exceptions) if isinstance(exc, ExceptionGroup) else [exc]
        text = "\n".join(_describe(e) for e in found)
        return FuzzOutcome(name, calls, text)
    return FuzzOutcome(name, calls, None)
