"""trainleak: what can be reconstructed from a training release, and what provably cannot.

The package is layered; imports point downwards only (``docs/architecture.md``, enforced by
``tests/test_layers.py``)::

    errors, validation, progress, linalg
      -> data, models -> metrics -> releases -> bounds -> defenses
      -> systems | attacks   (siblings: systems produce releases, attacks consume them)
      -> scenarios -> experiments -> audit -> cli

Audit your own release in one call: ``trainleak.assess("release.json", "knowledge.yaml")``
returns an :class:`Assessment` with the risk card (:mod:`trainleak.audit.assess`).
"""

import importlib
from typing import Any

from trainleak.errors import (
    ConfigError,
    DataNotFoundError,
    MalformedFileError,
    MetadataError,
    MissingExtraError,
    MissingKnowledgeError,
    NonFiniteWeightsError,
    ReleaseFileError,
    ReleaseTypeError,
    SpecMismatchError,
    TrainleakError,
    UnsafeFileError,
)

__version__ = "0.1.0"

_LAZY = {"assess": "trainleak.audit.assess", "Assessment": "trainleak.audit.assess"}


def __getattr__(name: str) -> Any:
    """``trainleak.assess`` and ``trainleak.Assessment``, imported on first use: importing any
    part of trainleak (a CLI start, each audit worker) then does not load every attack."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trainleak' has no attribute {name!r}")


__all__ = [
    "Assessment",
    "ConfigError",
    "DataNotFoundError",
    "MalformedFileError",
    "MetadataError",
    "MissingExtraError",
    "MissingKnowledgeError",
    "NonFiniteWeightsError",
    "ReleaseFileError",
    "ReleaseTypeError",
    "SpecMismatchError",
    "TrainleakError",
    "UnsafeFileError",
    "__version__",
    "assess",
]
