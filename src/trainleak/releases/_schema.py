"""Shared pieces of the release and knowledge file readers: strict schemas, text files, tensors.

A schema is a pydantic model with ``extra="forbid"`` and ``strict=True``: an unknown key is an
error (a typo never silently falls back to a default) and a value of the wrong type is an error
(``"5"`` is not the integer 5). Every failure becomes a
:class:`~trainleak.errors.ReleaseFileError` naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import torch
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from trainleak.errors import DataNotFoundError, MalformedFileError, MetadataError
from trainleak.models.tensor_files import read_tensor_file

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Base of the file schemas: unknown keys and mistyped values are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """Parse a JSON (``.json``) or YAML file holding one mapping.

    Raises:
        DataNotFoundError: the file does not exist.
        MalformedFileError: it does not parse, or holds something other than a mapping.
    """
    if not path.is_file():
        raise DataNotFoundError(f"{what} {str(path)!r} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedFileError(path, "", f"unreadable as UTF-8 text ({exc})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise MalformedFileError(
            path, "", f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except yaml.YAMLError as exc:
        raise MalformedFileError(path, "", f"malformed YAML ({exc})") from None
    if not isinstance(data, dict):
        raise MalformedFileError(path, "", f"expected a mapping, found {type(data).__name__}")
    return data


def validate(schema: type[M], data: dict[str, Any], path: Path, prefix: str = "") -> M:
    """``schema.model_validate(data)``, with the first error as a :class:`MetadataError`."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = prefix + ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            parent = _parent(schema, err["loc"][:-1])
            known = sorted(parent.model_fields) if parent is not None else []
            raise MetadataError(path, loc, f"unknown field; known fields: {known}") from None
        if err["type"] == "missing":
            raise MetadataError(path, loc, "required field is missing") from None
        received = err.get("input")
        raise MetadataError(
            path, loc, f"{err['msg'].lower()}; received {received!r} ({type(received).__name__})"
        ) from None


def _parent(schema: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class at ``loc`` inside ``schema`` (for the list of known fields)."""
    current: Any = schema
    for part in loc:
        field = current.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        current = _model_in(field.annotation)
        if current is None:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def resolve(base: Path, relative: str) -> Path:
    """A path named in a file, relative to that file's folder unless absolute."""
    p = Path(relative).expanduser()
    return p if p.is_absolute() else base.parent / p


class TensorRef(Strict):
    """A tensor in a file: ``file`` (safetensors or torch zip) and, if it holds several,
    ``tensor`` (its name)."""

    file: str
    tensor: str | None = None


def load_tensor_ref(ref: str | TensorRef, base: Path, field: str) -> torch.Tensor:
    """Read the tensor a file names in ``field`` (a path, or ``{file, tensor}``)."""
    ref = TensorRef(file=ref) if isinstance(ref, str) else ref
    path = resolve(base, ref.file)
    tensors = read_tensor_file(path)
    if ref.tensor is None:
        if len(tensors) != 1:
            raise MetadataError(
                base,
                field,
                f"{path} holds {len(tensors)} tensors {sorted(tensors)[:8]}; "
                f"name one with {{file: ..., tensor: NAME}}",
            )
        return next(iter(tensors.values()))
    if ref.tensor not in tensors:
        raise MetadataError(
            base, f"{field}.tensor", f"{path} has no tensor {ref.tensor!r}: {sorted(tensors)}"
        )
    return tensors[ref.tensor]
