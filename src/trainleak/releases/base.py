"""The threat model, typed: what the adversary observes (a Release) and knows (Knowledge).

A :class:`Release` is exactly what leaves the training pipeline. Each release surface (a
checkpoint, a federated update, split-learning activations, an unlearning broadcast log, ...)
is one frozen dataclass subclass. :class:`Knowledge` is everything else the adversary has; an
attack declares the fields it needs and is refused without them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from trainleak.errors import MissingKnowledgeError


@dataclass(frozen=True)
class Release:
    """Base class of everything an adversary can observe."""

    def describe(self) -> str:
        """One line for reports and the CLI."""
        return type(self).__name__


@dataclass(frozen=True)
class Knowledge:
    """What the adversary knows besides the release. ``None`` means "not known".

    Attributes:
        input_shape: shape of one input, e.g. ``(1, 28, 28)``.
        value_range: the box the inputs live in, e.g. ``(-1.0, 1.0)``.
        label_set: the possible labels, e.g. ``(0, 1)`` or ``tuple(range(10))``.
        labels: the labels of the records to reconstruct, when known.
        n_records: the (approximate) number of training records.
        prior: samples from the data distribution (N, *input_shape), e.g. public data.
        other_records: the records other than the target ``(x, y)`` (informed adversary).
        hyperparameters: training or mechanism hyper-parameters the adversary knows.
        active: whether the adversary may choose the model (a malicious server).
    """

    input_shape: tuple[int, ...] | None = None
    value_range: tuple[float, float] | None = None
    label_set: tuple[int, ...] | None = None
    labels: torch.Tensor | None = None
    n_records: int | None = None
    prior: torch.Tensor | None = None
    other_records: tuple[torch.Tensor, torch.Tensor] | None = None
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    active: bool = False

    def require(self, names: frozenset[str] | set[str], *, who: str) -> None:
        """Raise :class:`MissingKnowledgeError` naming every required field that is unknown."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown_fields = sorted(n for n in names if n not in known)
        if unknown_fields:
            raise MissingKnowledgeError(f"{who} requires unknown knowledge fields {unknown_fields}")
        missing = sorted(n for n in names if _is_missing(getattr(self, n)))
        if missing:
            raise MissingKnowledgeError(
                f"{who} needs the adversary to know {missing}, but Knowledge has them unset; "
                f"pass e.g. Knowledge({missing[0]}=...)"
            )


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool):
        return not value
    return isinstance(value, dict) and not value
