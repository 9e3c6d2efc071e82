"""What a model is, independent of any release: its architecture spec and its weights.

:class:`ModelSpec` rebuilds an architecture (``trainleak.models.build_model(spec)``);
:func:`load_state_dict` reads weights from safetensors, or from a torch file with
``weights_only=True``. Arbitrary pickles are refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from trainleak.errors import (
    ConfigError,
    DataNotFoundError,
    MalformedFileError,
    TrainleakError,
    UnsafeFileError,
)
from trainleak.models.tensor_files import read_tensor_file, sniff

StateDict = dict[str, torch.Tensor]


@dataclass(frozen=True)
class ModelSpec:
    """A serialisable description of an architecture: ``models.build_model(spec)`` rebuilds it.

    Attributes:
        kind: registered architecture name (see :func:`trainleak.models.available_models`).
        kwargs: constructor keywords of that architecture (JSON-serialisable).
    """

    kind: str
    kwargs: dict[str, Any] = field(default_factory=dict)


def load_state_dict(path: str | Path) -> StateDict:
    """Load a state dict from safetensors, or from a torch file with ``weights_only=True``.

    The format is recognised by the file's content (:func:`~trainleak.models.tensor_files.sniff`);
    arbitrary pickles are refused: unpickling runs code chosen by whoever wrote the file.

    Raises:
        DataNotFoundError: the file does not exist.
        UnsafeFileError: the file is a pickle, or a torch file whose contents need unpickling.
        MalformedFileError: a damaged or lying file (see :func:`read_tensor_file`).
    """
    return read_tensor_file(path, finite=False)


def read_safetensors(path: Path) -> StateDict:
    """Tensors of a weights file of a release folder (:func:`read_tensor_file`, NaN allowed);
    a malformed one is a :class:`~trainleak.errors.MalformedFileError`."""
    return read_tensor_file(path, finite=False)


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; anything else is a :class:`MalformedFileError`."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MalformedFileError(path, "", f"not readable JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise MalformedFileError(path, "", f"a JSON {type(doc).__name__}, not an object")
    return doc


def read_release_dir(
    directory: Path, tensors: str, meta: str, what: str
) -> tuple[StateDict, dict[str, Any]]:
    """The tensors and the JSON metadata of a release folder written by a ``save`` method.

    Args:
        directory: the folder.
        tensors: the name of its safetensors file (e.g. ``"weights.safetensors"``).
        meta: the name of its JSON file (e.g. ``"release.json"``).
        what: what the folder holds, for the message (e.g. ``"checkpoint"``).

    Raises:
        DataNotFoundError: either file is missing (the message names it and the folder).
        MalformedFileError: a file is not readable JSON or safetensors.
        UnsafeFileError: the tensor file is a pickle.
    """
    for name in (tensors, meta):
        if not (directory / name).is_file():
            raise DataNotFoundError(
                f"{what} file {directory / name} is missing (looked in {directory})"
            )
    return read_safetensors(directory / tensors), read_json_object(directory / meta)


@contextmanager
def metadata_of(path: Path) -> Iterator[None]:
    """Name ``path`` in any error raised while building a release from its metadata: a
    :class:`TrainleakError` gets the path prefixed, a missing key or mistyped value becomes a
    :class:`ConfigError`."""
    try:
        yield
    except TrainleakError as exc:
        exc.args = (f"{path}: {exc}", *exc.args[1:])
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise ConfigError(f"{path}: malformed metadata ({type(exc).__name__}: {exc})") from None


def spec_from_json(value: Any, where: str) -> ModelSpec:
    """A :class:`ModelSpec` from its JSON form ``{"kind": ..., "kwargs": {...}}``."""
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("kind"), str)
        or not isinstance(value.get("kwargs", {}), dict)
        or set(value) - {"kind", "kwargs"}
    ):
        raise ConfigError.invalid(where, '{"kind": name, "kwargs": {...}}', value)
    return ModelSpec(value["kind"], dict(value.get("kwargs", {})))


def refuse_pickle(p: Path) -> None:
    """Raise :class:`UnsafeFileError` when ``p`` is a pickle (a safetensors file never is)."""
    if sniff(p) == "pickle":
        raise UnsafeFileError(
            f"refusing to load {p}: it is a Python pickle, and unpickling can run arbitrary code; "
            "save weights with safetensors (or torch.save of a plain state dict, which trainleak "
            "reads with weights_only=True)"
        )
