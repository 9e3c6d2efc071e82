"""The validation idiom: constraints declared with each field, checked in one place."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from trainleak.attacks import available_attacks
from trainleak.defenses.gradient import ClipNorm, GaussianNoise, Quantize
from trainleak.errors import ConfigError
from trainleak.validation import (
    Constraint,
    check_choice,
    check_fields,
    check_in_range,
    check_positive,
    field_constraint,
    param,
)

NAN = float("nan")

# (constraint, accepted values, refused values, expectation text)
CASES: list[tuple[Constraint, list[Any], list[Any], str]] = [
    (Constraint(gt=0), [1e-300, 5], [0, -1.0, NAN, "1"], "a positive number"),
    (Constraint(ge=0), [0, 0.0, 3], [-1e-300, NAN, None], "a non-negative number"),
    (Constraint(ge=1), [1, 2.5], [0.999, NAN], "a number >= 1"),
    (Constraint(gt=2), [2.001], [2, NAN], "a number > 2"),
    (Constraint(lt=1), [0.999, -5], [1, NAN], "a number < 1"),
    (Constraint(le=1), [1, -5], [1.001, NAN], "a number <= 1"),
    (Constraint(gt=0, lt=1), [1e-12, 0.5], [0, 1, NAN], "a number in (0, 1)"),
    (Constraint(ge=0, lt=1), [0, 0.9], [1, -0.1, NAN], "a number in [0, 1)"),
    (Constraint(gt=0, le=1), [1, 1e-9], [0, 1.5, NAN], "a number in (0, 1]"),
    (Constraint(ge=1, le=32, integer=True), [1, 32], [0, 33, 2.0, NAN], "an integer in [1, 32]"),
    (Constraint(ge=1, integer=True), [1, 7], [0, 1.5, "2"], "an integer >= 1"),
    (Constraint(gt=0, optional=True), [None, 0.1], [0, NAN], "None or a positive number"),
    (Constraint(choices=("a", "b")), ["a", "b"], ["c", None, 1], "one of ['a', 'b']"),
    (Constraint(choices=("a",), optional=True), [None, "a"], ["b"], "None or one of ['a']"),
]


@pytest.mark.parametrize(("constraint", "good", "bad", "text"), CASES)
def test_constraint_accepts_and_refuses(
    constraint: Constraint, good: list[Any], bad: list[Any], text: str
) -> None:
    assert constraint.expectation() == text
    for value in good:
        assert constraint.accepts(value), value
        constraint.check("knob", value)
    for value in bad:
        assert not constraint.accepts(value), value
        with pytest.raises(ConfigError, match=rf"'knob': expected {_escape(text)}, received"):
            constraint.check("knob", value)


def _escape(text: str) -> str:
    return "".join("\\" + c if c in "()[]." else c for c in text)


def test_constraint_refuses_contradictory_declarations() -> None:
    with pytest.raises(TypeError, match="gt, ge"):
        Constraint(gt=0, ge=0)
    with pytest.raises(TypeError, match="lt, le"):
        Constraint(lt=1, le=1)
    with pytest.raises(TypeError, match="choices"):
        Constraint(ge=0, choices=("a",))


Mode = Literal["fast", "exact"]


@dataclass(frozen=True, kw_only=True)
class _Config:
    rate: float = param(gt=0, le=1)
    steps: int = param(10, ge=0)
    tol: float | None = param(None, gt=0, lt=1)
    mode: Mode = param("fast", choices=Mode)
    label: str = "free"

    def __post_init__(self) -> None:
        check_fields(self)


def test_param_declares_and_check_fields_checks_every_field() -> None:
    cfg = _Config(rate=1.0)
    assert (cfg.steps, cfg.tol, cfg.mode, cfg.label) == (10, None, "fast", "free")
    assert _Config(rate=0.5, tol=0.1, mode="exact").mode == "exact"
    for bad in ({"rate": 0.0}, {"rate": NAN}, {"steps": -1}, {"tol": 1.0}, {"mode": "slow"}):
        (name,) = bad
        with pytest.raises(ConfigError, match=rf"invalid value for '{name}'"):
            _Config(**{"rate": 0.5, **bad})
    with pytest.raises(TypeError, match="rate"):  # a required field stays required
        _Config()  # type: ignore[call-arg]


def test_literal_choices_and_default_none_is_optional() -> None:
    fields = {f.name: field_constraint(f) for f in dataclasses.fields(_Config)}
    assert fields["mode"] == Constraint(choices=("fast", "exact"))
    assert fields["tol"] is not None and fields["tol"].optional
    assert fields["steps"] is not None and not fields["steps"].optional
    assert fields["label"] is None


def test_argument_checks_share_the_constraint() -> None:
    check_positive("eps", 1e-9)
    check_positive("eps", 0.0, allow_zero=True)
    for value, allow_zero in ((0.0, False), (-1e-9, True), (NAN, True)):
        with pytest.raises(ConfigError, match="'eps'"):
            check_positive("eps", value, allow_zero=allow_zero)
    check_in_range("q", 1.0, 0.0, 1.0, closed="(]")
    with pytest.raises(ConfigError, match=r"'q': expected a number in \(0\.0, 1\.0\]"):
        check_in_range("q", 0.0, 0.0, 1.0, closed="(]")
    check_in_range("t", -1.0, -1.0, 1.0)
    with pytest.raises(ConfigError, match="'t'"):
        check_in_range("t", math.nan, -1.0, 1.0)
    with pytest.raises(ValueError, match="closed"):
        check_in_range("t", 0.0, -1.0, 1.0, closed="[[")
    check_choice("split", "test", ("train", "test"))
    check_choice("mode", "exact", Mode)
    with pytest.raises(ConfigError, match=r"'split': expected one of \['train', 'test'\]"):
        check_choice("split", "valid", ["train", "test"])


def test_defenses_declare_their_constraints() -> None:
    assert GaussianNoise(0.0).sigma == 0.0
    assert Quantize(32).bits == 32
    for build, name in (
        (lambda: GaussianNoise(-0.1), "sigma"),
        (lambda: ClipNorm(0.0), "max_norm"),
        (lambda: Quantize(33), "bits"),
        (lambda: Quantize(8.0), "bits"),  # type: ignore[arg-type]
        (lambda: Quantize(8, mode="round"), "mode"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigError, match=name):
            build()


def _constraints(cls: type) -> dict[str, Constraint]:
    return {f.name: c for f in dataclasses.fields(cls) if (c := field_constraint(f)) is not None}


def test_subclasses_keep_their_parents_constraints() -> None:
    """A subclass redeclaring a constrained field without ``param`` would drop its check."""
    for name, cls in available_attacks().items():
        own = _constraints(cls)
        for base in cls.__mro__[1:]:
            if dataclasses.is_dataclass(base):
                for field_name, constraint in _constraints(base).items():
                    assert own.get(field_name) == constraint, (name, field_name)


@pytest.mark.parametrize("name", sorted(available_attacks()))
def test_every_bounded_attack_field_refuses_nan(name: str) -> None:
    cls = available_attacks()[name]
    bounded = [n for n, c in _constraints(cls).items() if c.choices is None]
    for field_name in bounded:
        with pytest.raises(ConfigError, match=f"'{field_name}'"):
            cls(**{field_name: NAN})
