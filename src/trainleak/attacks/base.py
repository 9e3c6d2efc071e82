"""The attack contract: one class per attack, a final ``__call__``, one result type.

Subclasses are frozen keyword-only dataclasses whose fields are the hyper-parameters, with the
paper's defaults, each declaring its constraint with :func:`trainleak.validation.param`. At
construction :func:`~trainleak.validation.check_fields` checks every declared constraint, then
``validate`` runs the checks that involve several fields; ``run`` does the work. The base
class's ``__call__`` checks the release type and the required knowledge, builds a local
``torch.Generator`` from the seed (nothing global is ever seeded), times the run and checks the
shape of what comes back.

Example:
    >>> from trainleak.attacks import available_attacks
    >>> "kkt" in available_attacks()
    True
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, final

import torch

from trainleak.errors import ConfigError, ReleaseTypeError, ShapeError
from trainleak.progress import Progress
from trainleak.releases.base import Release
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import check_fields

R = TypeVar("R", bound=Release)


@dataclass(frozen=True)
class Reconstruction:
    """What every attack returns.

    Attributes:
        inputs: reconstructed inputs, shape ``(m, *input_shape)`` (or token ids ``(m, L)``).
        labels: recovered labels ``(m,)``, when the attack recovers them.
        scores: the attack's own per-candidate score (higher = more confident), when it has one.
        certified: per-candidate certificate computed without ground truth, when it issues one.
        diagnostics: scalars and small arrays describing the run (loss, rank, residual, ...).
        trace: per-step records (e.g. ``{"step": 100, "loss": 0.3}``).
        attack: the attack's registry name.
        seconds: wall time of the run.
    """

    inputs: torch.Tensor
    labels: torch.Tensor | None = None
    scores: torch.Tensor | None = None
    certified: torch.Tensor | None = None
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    trace: list[dict[str, float]] = field(default_factory=list)
    attack: str = ""
    seconds: float = 0.0

    def __len__(self) -> int:
        return int(self.inputs.shape[0])


class Attack(Generic[R]):
    """Base class: maps (Release, Knowledge) to a :class:`Reconstruction`.

    Subclasses set ``name``, ``summary``, ``release_type`` and ``requires``, are decorated with
    ``@dataclass(frozen=True, kw_only=True)`` and ``@register_attack``, declare each
    hyper-parameter's constraint with ``param(...)``, implement ``run``, and override
    ``validate`` only for constraints that involve several fields. Each registered attack has a
    case in the conformance table (``tests/conformance_cases.py``), which a test keeps complete.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    release_type: ClassVar[type[Release]] = Release
    requires: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        check_fields(self)
        self.validate()

    def validate(self) -> None:
        """Cross-field checks (per-field ones are declared with ``param``); raise
        :class:`ConfigError` naming the bad field."""

    @final
    def __call__(
        self,
        release: R,
        knowledge: Knowledge | None = None,
        *,
        seed: int = 0,
        progress: Progress | None = None,
    ) -> Reconstruction:
        """Run the attack: check inputs, seed a local generator, time, check the output."""
        if not isinstance(release, self.release_type):
            raise ReleaseTypeError(
                f"{type(self).__name__} attacks a {self.release_type.__name__} release, "
                f"received {type(release).__name__}"
            )
        knowledge = knowledge if knowledge is not None else Knowledge()
        knowledge.require(self.requires, who=type(self).__name__)
        if not isinstance(seed, int) or seed < 0:
            raise ConfigError.invalid("seed", "a non-negative integer", seed)
        generator = torch.Generator().manual_seed(seed)
        start = time.perf_counter()
        result = self.run(release, knowledge, generator, progress)
        seconds = time.perf_counter() - start
        expected = self.expected_shape(release, knowledge)
        if expected is not None and tuple(result.inputs.shape[1:]) != tuple(expected):
            raise ShapeError(
                f"{type(self).__name__} returned inputs of shape {tuple(result.inputs.shape)}, "
                f"expected (m, {', '.join(map(str, expected))})"
            )
        return dataclasses.replace(result, attack=self.name, seconds=seconds)

    def run(
        self,
        release: R,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        """The subclass's algorithm. Never sees ground truth."""
        raise NotImplementedError

    def expected_shape(self, release: R, knowledge: Knowledge) -> tuple[int, ...] | None:
        """The shape of one reconstructed input (default: ``knowledge.input_shape``)."""
        return knowledge.input_shape


_ATTACKS: dict[str, type[Attack[Any]]] = {}

A = TypeVar("A", bound=type)


def register_attack(cls: A) -> A:
    """Class decorator: add an attack to the registry under its ``name``."""
    name = getattr(cls, "name", "")
    if not name:
        raise TypeError(f"{cls.__name__} must set the class attribute 'name' to register")
    existing = _ATTACKS.get(name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise TypeError(f"attack name {name!r} is taken by {existing.__qualname__}")
    _ATTACKS[name] = cls
    return cls


def registered_attacks() -> dict[str, type[Attack[Any]]]:
    """The registry as it stands (see ``trainleak.attacks.available_attacks``)."""
    return dict(_ATTACKS)
