"""One validation idiom: each constraint is declared with its field and checked in one place.

Three kinds of values are validated, all with the same constraints and the same message
(:meth:`ConfigError.invalid <trainleak.errors.ConfigError.invalid>`: the field, what was
expected, what was received):

* **Dataclass fields** (attacks, defenses, mechanisms, releases): the constraint is declared on
  the field with :func:`param`, and :func:`check_fields` checks every declared field. ``Attack``
  calls it for every attack before its ``validate()``, which keeps only checks that involve
  several fields; other dataclasses call it from ``__post_init__``::

      @dataclass(frozen=True, kw_only=True)
      class MyAttack(Attack[Checkpoint]):
          steps: int = param(100, ge=0)
          lr: float = param(0.1, gt=0)
          mode: Mode = param("fast", choices=Mode)  # Mode = Literal["fast", "exact"]

* **Pydantic models** (experiment configs, ``TrainConfig``, ``DPSGDConfig``): the same idea in
  pydantic's spelling, ``lr: float = Field(0.1, gt=0)``; pydantic checks every field at
  construction and ``trainleak.experiments.base.parse_config`` turns its error into a
  :class:`ConfigError` with this message.

* **Plain function arguments** (bounds, metrics, loaders): :func:`check_positive`,
  :func:`check_in_range` and :func:`check_choice`, thin spellings of the same
  :class:`Constraint`.

NaN satisfies no numeric bound, so it is refused wherever a bound is declared.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

import torch

from trainleak.errors import ConfigError

_KEY = "trainleak.constraint"


@dataclass(frozen=True)
class Constraint:
    """What a value must satisfy.

    Attributes:
        gt, ge, lt, le: numeric bounds (strict or not); NaN satisfies none.
        choices: the allowed values (exclusive with the bounds).
        integer: also require an ``int`` (``bool`` included, as Python has it).
        optional: also accept ``None``.
    """

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    choices: tuple[Any, ...] | None = None
    integer: bool = False
    optional: bool = False

    def __post_init__(self) -> None:
        bounded = any(b is not None for b in (self.gt, self.ge, self.lt, self.le))
        if self.gt is not None and self.ge is not None:
            raise TypeError("a constraint takes at most one of gt, ge")
        if self.lt is not None and self.le is not None:
            raise TypeError("a constraint takes at most one of lt, le")
        if self.choices is not None and (bounded or self.integer):
            raise TypeError("a constraint takes either choices or numeric bounds, not both")

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` satisfies the constraint."""
        if value is None:
            return self.optional
        if self.choices is not None:
            return value in self.choices
        if self.integer and not isinstance(value, int):
            return False
        try:
            return bool(
                (self.gt is None or value > self.gt)
                and (self.ge is None or value >= self.ge)
                and (self.lt is None or value < self.lt)
                and (self.le is None or value <= self.le)
            )
        except TypeError:  # not comparable with a number
            return False

    def expectation(self) -> str:
        """The expectation, in words: "a positive number", "a number in (0, 1]", ..."""
        text = self._expected_value()
        return f"None or {text}" if self.optional else text

    def _expected_value(self) -> str:
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        kind = "integer" if self.integer else "number"
        noun = f"an {kind}" if self.integer else f"a {kind}"
        low = "(" if self.gt is not None else "["
        lo = self.gt if self.gt is not None else self.ge
        high = ")" if self.lt is not None else "]"
        hi = self.lt if self.lt is not None else self.le
        if lo is not None and hi is not None:
            return f"{noun} in {low}{lo}, {hi}{high}"
        if lo == 0 and hi is None:
            sign = "positive" if self.gt is not None else "non-negative"
            return f"a {sign} {kind}"
        if lo is not None:
            return f"{noun} {'>' if self.gt is not None else '>='} {lo}"
        if hi is not None:
            return f"{noun} {'<' if self.lt is not None else '<='} {hi}"
        return noun

    def check(self, name: str, value: Any) -> None:
        """Raise :class:`ConfigError` naming ``name`` unless ``value`` satisfies this."""
        if not self.accepts(value):
            raise ConfigError.invalid(name, self.expectation(), value)


def _choices(choices: Any) -> tuple[Any, ...] | None:
    """A tuple of allowed values from a sequence or a ``Literal[...]`` type."""
    if choices is None:
        return None
    if typing.get_origin(choices) is typing.Literal:
        return typing.get_args(choices)
    return tuple(choices)


def param(
    default: Any = dataclasses.MISSING,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    choices: Any = None,
    integer: bool = False,
    optional: bool | None = None,
) -> Any:
    """A dataclass field with its constraint, which :func:`check_fields` checks.

    Args:
        default: the default (omit for a required field).
        gt, ge, lt, le: numeric bounds.
        choices: the allowed values, as a sequence or a ``Literal[...]`` type.
        integer: also require an ``int``.
        optional: also accept ``None`` (default: exactly when the default is ``None``).

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Noise:
        ...     sigma: float = param(1.0, ge=0)
        ...     def __post_init__(self) -> None:
        ...         check_fields(self)
        >>> Noise(-1.0)
        Traceback (most recent call last):
        ...
        trainleak.errors.ConfigError: invalid value for 'sigma': expected a non-negative number, received -1.0
    """  # noqa: E501
    constraint = Constraint(
        gt=gt,
        ge=ge,
        lt=lt,
        le=le,
        choices=_choices(choices),
        integer=integer,
        optional=default is None if optional is None else optional,
    )
    return dataclasses.field(default=default, metadata={_KEY: constraint})


def field_constraint(f: dataclasses.Field[Any]) -> Constraint | None:
    """The constraint declared on a dataclass field with :func:`param`, if any."""
    found = f.metadata.get(_KEY)
    return found if isinstance(found, Constraint) else None


def check_fields(obj: Any) -> None:
    """Check every field of dataclass ``obj`` declared with :func:`param`, in field order.

    Raises:
        ConfigError: naming the first field whose value breaks its constraint.
    """
    for f in dataclasses.fields(obj):
        constraint = field_constraint(f)
        if constraint is not None:
            constraint.check(f.name, getattr(obj, f.name))


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    """Raise :class:`ConfigError` unless argument ``value`` is positive (or zero when allowed)."""
    (Constraint(ge=0) if allow_zero else Constraint(gt=0)).check(name, value)


def check_in_range(name: str, value: float, low: float, high: float, *, closed: str = "[]") -> None:
    """Raise :class:`ConfigError` unless argument ``value`` lies in the interval ``closed``.

    Args:
        closed: ``"[]"``, ``"[)"``, ``"(]"`` or ``"()"``: which ends belong to the interval.
    """
    if closed not in ("[]", "[)", "(]", "()"):
        raise ValueError(f"closed must be '[]', '[)', '(]' or '()', received {closed!r}")
    open_low, open_high = closed[0] == "(", closed[1] == ")"
    Constraint(
        gt=low if open_low else None,
        ge=None if open_low else low,
        lt=high if open_high else None,
        le=None if open_high else high,
    ).check(name, value)


def check_choice(name: str, value: Any, choices: Any) -> None:
    """Raise :class:`ConfigError` unless argument ``value`` is one of ``choices`` (a sequence or
    a ``Literal[...]`` type)."""
    Constraint(choices=_choices(choices)).check(name, value)


DEVICE_PATTERN = r"^(cpu|cuda(:[0-9]+)?|mps)$"


def torch_device(name: str, value: str) -> torch.device:
    """Argument ``value`` as a :class:`torch.device` (``cpu``, ``cuda``, ``cuda:N``, ``mps``),
    or a :class:`ConfigError` naming ``name``."""
    try:
        return torch.device(value)
    except (RuntimeError, TypeError):
        raise ConfigError.invalid(name, "a torch device name", value) from None
