"""Experiments, one module per seed claim; every experiment registers itself."""

from __future__ import annotations

import sys

from trainleak._discovery import import_submodules
from trainleak.errors import ConfigError
from trainleak.experiments.base import (
    Claim,
    ClaimFn,
    Experiment,
    ExperimentConfig,
    Result,
    claim,
    evaluate_claims,
    experiment,
    not_tested,
    parse_config,
    registered_experiments,
    rows_table,
)


def available_experiments() -> dict[str, Experiment]:
    """Every registered experiment, by name (imports all experiment modules first)."""
    import_submodules(sys.modules[__name__])
    return registered_experiments()


def get_experiment(name: str) -> Experiment:
    """The experiment registered as ``name`` (importing every experiment module only when it
    is not registered yet)."""
    exps = registered_experiments()
    if name not in exps:
        exps = available_experiments()
    if name not in exps:
        raise ConfigError.invalid("experiment", f"one of {sorted(exps)}", name)
    return exps[name]


__all__ = [
    "Claim",
    "ClaimFn",
    "Experiment",
    "ExperimentConfig",
    "Result",
    "available_experiments",
    "claim",
    "evaluate_claims",
    "experiment",
    "get_experiment",
    "not_tested",
    "parse_config",
    "rows_table",
]
