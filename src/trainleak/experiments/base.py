"""Experiments: a typed config plus ``run(config, progress) -> Result``.

An experiment never prints and never writes files: it returns numbers, tables, images and
matplotlib figures in a :class:`Result`; :mod:`trainleak.audit` writes and reports them.

Every experiment follows one shape:

1. a frozen dataclass row type for its sweep (one row per measured point);
2. the run produces a list of rows (numbers only, never display strings);
3. each of the seed's claims is a small pure function ``claim_fn(rows, config) -> Claim``
   listed in the module's ``CLAIMS`` tuple, so a unit test can feed it rows where it must
   hold and rows where it must fail;
4. display tables are built once from the rows at the end (:func:`rows_table`);
5. ``risk_of(rows, config)`` in the experiment's module builds the risk card of the riskiest
   release the rows describe (:mod:`trainleak.experiments.risk`), set as ``Result.risk``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainleak.errors import ConfigError, MissingExtraError
from trainleak.experiments.risk import RiskCard
from trainleak.progress import Progress

MAX_SEED = 2**31 - 1
"""The largest seed an experiment config accepts."""


class ExperimentConfig(BaseModel):
    """Base of every experiment config: unknown keys are errors, values are validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # bounded so that every generator it seeds (torch, numpy, scikit-learn) accepts it, with
    # room for the offsets experiments add (seed * 100003 + k stays far below 2**63)
    seed: int = Field(0, ge=0, le=MAX_SEED)


@dataclass(frozen=True)
class Claim:
    """One of the seed paper's claims, checked against this run.

    Attributes:
        text: the claim, in words.
        holds: whether this run's measurements support it (computed, never hand-written).
        evidence: the numbers it was decided on.
    """

    text: str
    holds: bool
    evidence: Mapping[str, Any] = field(default_factory=dict)


def claim(text: str, holds: bool, **evidence: Any) -> Claim:
    """Build a :class:`Claim`; ``holds`` must be computed from the run's rows."""
    return Claim(text=text, holds=bool(holds), evidence=evidence)


def not_tested(text: str, reason: str, **evidence: Any) -> Claim:
    """A claim the run cannot decide (for example a sweep with a single point).

    It is reported as not holding, with the reason in its evidence, never as holding.
    """
    return Claim(text=text, holds=False, evidence={"not_tested": reason, **evidence})


ClaimFn = Callable[[Sequence[Any], Any], Claim]
"""A claim function: ``(rows, config) -> Claim``; pure, no hidden state."""


def evaluate_claims(fns: Iterable[ClaimFn], rows: Sequence[Any], config: Any) -> list[Claim]:
    """Apply every claim function to the same rows and config."""
    return [fn(rows, config) for fn in fns]


def rows_table(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """A display table (list of dicts) from frozen dataclass rows."""
    out = []
    for row in rows:
        if not dataclasses.is_dataclass(row) or isinstance(row, type):
            raise TypeError(f"rows_table expects dataclass instances, got {type(row).__name__}")
        out.append(dataclasses.asdict(row))
    return out


@dataclass
class Result:
    """Everything an experiment produces.

    Attributes:
        experiment: the experiment's registry name.
        config: the validated config, as a dict.
        metrics: scalar metrics (JSON-serialisable).
        claims: the seed's claims and whether they held.
        tables: named tables, each a list of rows (dicts), shown in the report.
        images: named images (H, W) or (H, W, 3), floats in [0, 1] or uint8, saved as PNG.
        figures: named matplotlib figures, saved as PNG.
        notes: free text shown in the report (what was measured and how).
        artifacts: paths written by the runner (filled in by :mod:`trainleak.audit`).
        risk: the risk card (strongest attack, strongest bound, verdict), when the experiment
            builds one (:mod:`trainleak.experiments.risk`); the report shows it first.
    """

    experiment: str
    config: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    images: dict[str, np.ndarray] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    artifacts: dict[str, str] = field(default_factory=dict)
    risk: RiskCard | None = None

    def claim(self, text: str, holds: bool, **evidence: Any) -> None:
        """Append a claim; ``holds`` must come from measurements."""
        self.claims.append(Claim(text=text, holds=bool(holds), evidence=evidence))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken install
        return False


C = TypeVar("C", bound=ExperimentConfig)
RunFn = Callable[[Any, Progress | None], Result]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment."""

    name: str
    summary: str
    config_type: type[ExperimentConfig]
    run_fn: RunFn
    requires: tuple[tuple[str, str], ...] = ()
    """Optional dependencies: ``(module, extra)`` pairs, e.g. ``(("opacus", "dp"),)``."""

    def missing_extras(self) -> list[str]:
        """The extras (of ``requires``) whose module is not installed; nothing is imported."""
        return sorted({extra for module, extra in self.requires if not _installed(module)})

    def check_extras(self) -> None:
        """Raise :class:`MissingExtraError` with the one ``pip install`` line if one is missing."""
        missing = self.missing_extras()
        if missing:
            modules = sorted({m for m, e in self.requires if e in missing})
            raise MissingExtraError(
                f"experiment {self.name!r} needs {', '.join(modules)}, which is not installed: "
                f"pip install 'trainleak[{','.join(missing)}]'"
            )

    def make_config(self, overrides: Mapping[str, Any] | None = None) -> ExperimentConfig:
        """Validate ``overrides`` against the config; errors name field, expectation and value."""
        return parse_config(self.config_type, dict(overrides or {}))

    def run(self, config: ExperimentConfig, progress: Progress | None = None) -> Result:
        """Run with a validated config."""
        if not isinstance(config, self.config_type):
            raise ConfigError.invalid("config", self.config_type.__name__, type(config).__name__)
        return self.run_fn(config, progress)


_EXPERIMENTS: dict[str, Experiment] = {}


def experiment(
    name: str, summary: str, config_type: type[C], *, requires: Mapping[str, str] | None = None
) -> Callable[[Callable[[C, Progress | None], Result]], Callable[[C, Progress | None], Result]]:
    """Decorator registering ``run(config, progress) -> Result`` as experiment ``name``.

    Args:
        requires: optional modules it needs, mapped to the trainleak extra that installs them
            (``{"opacus": "dp"}``); ``trainleak list`` marks the experiment when one is missing
            and running it names the ``pip install`` line instead of failing mid-run.
    """

    def wrap(fn: Callable[[C, Progress | None], Result]) -> Callable[[C, Progress | None], Result]:
        existing = _EXPERIMENTS.get(name)
        if existing is not None and existing.run_fn.__qualname__ != fn.__qualname__:
            raise TypeError(f"experiment name {name!r} is taken")
        needs = tuple(sorted((requires or {}).items()))
        _EXPERIMENTS[name] = Experiment(name, summary, config_type, fn, needs)
        return fn

    return wrap


def registered_experiments() -> dict[str, Experiment]:
    """The registry as it stands."""
    return dict(_EXPERIMENTS)


def parse_config(config_type: type[C], values: dict[str, Any]) -> C:
    """Validate ``values``; a :class:`ConfigError` names the field, expectation and value."""
    try:
        config = config_type.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigError):  # raised by a model validator: already clear
            raise cause from None
        loc = ".".join(str(p) for p in err["loc"]) or "config"
        if err["type"] == "extra_forbidden":
            fields = sorted(config_type.model_fields)
            raise ConfigError(
                f"unknown config field {loc!r} for {config_type.__name__}; known fields: {fields}"
            ) from None
        raise ConfigError.invalid(loc, err["msg"].lower(), err.get("input")) from None
    _check_sweeps(config)
    return config


def _check_sweeps(config: ExperimentConfig) -> None:
    """Refuse to empty a sweep: a list field whose default has values (a sweep, or a set of
    cases) measures nothing when empty. A field may opt out with
    ``Field(..., json_schema_extra={"empty_ok": True})`` (e.g. the hidden widths of a model)."""
    for name, info in type(config).model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        value = getattr(config, name)
        if isinstance(value, list) and not value and not extra.get("empty_ok"):
            if not info.get_default(call_default_factory=True):
                continue  # empty by default: not a sweep
            raise ConfigError.invalid(name, "a non-empty list (a sweep needs a value)", value)
