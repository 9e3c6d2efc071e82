"""The small domain error hierarchy.

Every error a user can trigger with bad input is one of these, and its message names the
parameter (or file), what was expected and what was received.
"""

from __future__ import annotations

from typing import Any


class TrainleakError(Exception):
    """Base class of every error trainleak raises on purpose."""


class ConfigError(TrainleakError, ValueError):
    """An invalid hyper-parameter or config value."""

    @classmethod
    def invalid(cls, field: str, expected: str, received: Any) -> ConfigError:
        """Build the standard message: field, expectation, value received."""
        return cls(f"invalid value for {field!r}: expected {expected}, received {received!r}")


class DataNotFoundError(TrainleakError, FileNotFoundError):
    """A data file is missing or unreadable; the message says how to supply it."""


class ReleaseTypeError(TrainleakError, TypeError):
    """An attack, bound or defense was handed a release of the wrong type."""


class MissingKnowledgeError(TrainleakError, ValueError):
    """An attack was called without knowledge it declares as required."""


class UnsafeFileError(TrainleakError, ValueError):
    """A file would need unpickling arbitrary objects; trainleak refuses to load it."""


class MissingExtraError(TrainleakError, ImportError):
    """An optional dependency is not installed; the message names the ``pip install``."""


def import_extra(module: str, extra: str, purpose: str) -> Any:
    """Import an optional dependency, or raise :class:`MissingExtraError` naming the extra.

    Args:
        module: the module to import, e.g. ``"opacus"``.
        extra: trainleak's extra that installs it, e.g. ``"dp"``.
        purpose: what needs it, for the message ("DP-SGD training").
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(
            f"{purpose} needs {module.split('.')[0]}, which is not installed: "
            f"pip install 'trainleak[{extra}]'"
        ) from None


class ShapeError(TrainleakError, ValueError):
    """A tensor does not have the shape the operation needs."""


class ReleaseFileError(TrainleakError, ValueError):
    """A user-supplied release or knowledge file cannot be used; the message names the file and
    the field (or tensor) at fault, what was expected and what was found.

    Attributes:
        file: the offending file.
        field: the field, tensor name or header entry at fault (``""`` for the whole file).
    """

    def __init__(self, file: object, field: str, problem: str) -> None:
        self.file, self.field = str(file), field
        where = f"{self.file}: {field}" if field else self.file
        super().__init__(f"{where}: {problem}")


class MalformedFileError(ReleaseFileError):
    """The file is not what it claims: a truncated or lying safetensors header, offsets beyond
    the data, malformed JSON or YAML, an unrecognised format."""


class SpecMismatchError(ReleaseFileError):
    """The model spec does not match the tensors (names, shapes, dtypes, widths)."""


class NonFiniteWeightsError(ReleaseFileError):
    """A tensor holds NaN or infinite values."""


class MetadataError(ReleaseFileError):
    """Unknown, missing or mistyped metadata in a release spec or knowledge file."""


class StoreError(TrainleakError, ValueError):
    """A result store cannot be used: not a trainleak store, a newer schema, or read-only."""
