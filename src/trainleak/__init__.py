"""trainleak: what can be reconstructed from a training release, and what provably cannot.

The package is layered; imports point downwards only (``docs/architecture.md``, enforced by
``tests/test_layers.py``)::

    errors, validation, progress, linalg
      -> data, models -> metrics -> releases -> bounds -> defenses
      -> systems | attacks   (siblings: systems produce releases, attacks consume them)
      -> scenarios -> experiments -> audit -> cli
"""

from trainleak.errors import (
    ConfigError,
    DataNotFoundError,
    MissingExtraError,
    MissingKnowledgeError,
    ReleaseTypeError,
    TrainleakError,
    UnsafeFileError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataNotFoundError",
    "MissingExtraError",
    "MissingKnowledgeError",
    "ReleaseTypeError",
    "TrainleakError",
    "UnsafeFileError",
    "__version__",
]
