"""The threat model, typed: what the adversary observes (a Release) and knows (Knowledge).

A :class:`Release` is exactly what leaves the training pipeline. Each release surface (a
checkpoint, a federated update, split-learning activations, an unlearning broadcast log, ...)
is one frozen dataclass subclass. :class:`Knowledge` is everything else the adversary has; an
attack declares the fields it needs and is refused without them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """Base class of everything an adversary can observe."""

    def describe(self) -> str:
        """One line for reports and the CLI."""
        return type(self).__name__
