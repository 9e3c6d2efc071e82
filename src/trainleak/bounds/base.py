"""The bound contract: mechanism parameters (and data samples) in, a :class:`BoundResult` out.

Bounds are pure functions kept apart from training. Every component that enters the value is
reported, so the slack of a bound against the best attack can be audited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BoundResult:
    """A lower (or upper) bound with its parts.

    Attributes:
        value: the bound.
        unit: what ``value`` measures, e.g. ``"mse per pixel"`` or ``"nats"``.
        kind: ``"lower"`` (no attack can do better than this) or ``"upper"``.
        components: every intermediate quantity, by name.
        assumptions: what must hold for the bound to be valid.
    """

    value: float
    unit: str
    kind: str = "lower"
    components: Mapping[str, Any] = field(default_factory=dict)
    assumptions: str = ""
