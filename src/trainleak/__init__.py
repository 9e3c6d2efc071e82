"""trainleak: what can be reconstructed from a training release, and what provably cannot.

The package is layered (imports point downwards only)::

    data, models  ->  training  ->  releases  ->  attacks / bounds / defenses
                  ->  metrics   ->  experiments  ->  audit  ->  cli
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
