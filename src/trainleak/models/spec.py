"""What a model is, independent of any release: its architecture spec and its weights.

:class:`ModelSpec` rebuilds an architecture (``trainleak.models.build_model(spec)``);
:func:`load_state_dict` reads weights from safetensors, or from a torch file with
``weights_only=True``. Arbitrary pickles are refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from trainleak.data import CorruptDataError
from trainleak.errors import ConfigError, DataNotFoundError, UnsafeFileError

StateDict = dict[str, torch.Tensor]

_PICKLE_SUFFIXES = {".pkl", ".pickle", ".joblib", ".npy", ".npz"}


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

    Arbitrary pickles are refused: unpickling runs code chosen by whoever wrote the file.

    Raises:
        DataNotFoundError: the file does not exist (``CorruptDataError``: a malformed
            safetensors file).
        UnsafeFileError: the file is a pickle, or a torch file whose contents need unpickling.
    """
    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(f"weights file {p} does not exist")
    if p.suffix == ".safetensors":
        return read_safetensors(p)
    refuse_pickle(p)
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError subclasses and RuntimeError
        raise UnsafeFileError(
            f"refusing to load {p}: it holds objects other than tensors, and loading them would "
            f"unpickle arbitrary code ({type(exc).__name__}); re-save it as safetensors"
        ) from exc
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise UnsafeFileError(f"{p} does not hold a flat state dict of tensors")
    return dict(obj)


def read_safetensors(path: Path) -> StateDict:
    """Tensors of a safetensors file; a malformed one (truncated, a header that lies about
    offsets, shapes or dtypes, not safetensors at all) is a :class:`CorruptDataError`."""
    try:
        return dict(load_file(str(path)))
    except Exception as exc:  # the parser's own error type, OSError, ValueError...
        raise CorruptDataError(f"{path} is not a readable safetensors file: {exc}") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; anything else is a :class:`CorruptDataError`."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptDataError(f"{path} is not a readable JSON file: {exc}") from None
    if not isinstance(doc, dict):
        raise CorruptDataError(f"{path} holds {type(doc).__name__}, expected a JSON object")
    return doc


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
    with p.open("rb") as fh:
        head = fh.read(2)
    if p.suffix in _PICKLE_SUFFIXES or head[:1] == b"\x80":
        raise UnsafeFileError(
            f"refusing to load {p}: it is a Python pickle, and unpickling can run arbitrary code; "
            "save weights with safetensors (or torch.save of a plain state dict, which trainleak "
            "reads with weights_only=True)"
        )
