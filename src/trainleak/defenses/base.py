"""Release-time defenses: pure, composable transformations of a release.

A defense is any callable ``defense(release, generator) -> release`` of the same type.
:func:`chain` composes them left to right, like optax's ``chain``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch

from trainleak.releases.base import Release

R = TypeVar("R", bound=Release)


class Defense(Protocol):
    """A release-time transformation."""

    def __call__(self, release: R, generator: torch.Generator) -> R: ...


@dataclass(frozen=True)
class Chain:
    """Apply several defenses in order."""

    defenses: tuple[Defense, ...]

    def __call__(self, release: R, generator: torch.Generator) -> R:
        for d in self.defenses:
            release = d(release, generator)
        return release

    def __repr__(self) -> str:
        return "chain(" + ", ".join(repr(d) for d in self.defenses) + ")"


def chain(*defenses: Defense) -> Chain:
    """Compose defenses left to right."""
    return Chain(tuple(defenses))
