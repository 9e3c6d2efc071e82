"""The adversary's knowledge from a small YAML or JSON file, validated like a config.

Every key is a field of :class:`~trainleak.releases.knowledge.Knowledge`; unknown keys and
values of the wrong type are errors naming the file and the field. Tensors are given as a path
to a safetensors (or torch zip) file holding one tensor, or as ``{file: PATH, tensor: NAME}``;
paths are relative to the knowledge file::

    input_shape: [1, 8, 8]
    value_range: [0.0, 1.0]
    label_set: [0, 1]
    n_records: 100
    prior: public_digits.safetensors          # (N, 1, 8, 8) samples of the population
    other_records: {file: others.safetensors, x: x, y: y}
    auxiliary: {file: public.safetensors, x: x, y: y}   # labelled records of the population
    generative_prior: prior/       # a folder written by GenerativePrior.save (model inversion)
    candidate_texts: texts.txt     # one text a line, or a list (language-model membership)

``disclosures`` (what colluding parties hand over) cannot be written in a file yet.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from pydantic import Field

from trainleak.errors import (
    ConfigError,
    DataNotFoundError,
    MalformedFileError,
    MetadataError,
    ShapeError,
)
from trainleak.models.tensor_files import read_tensor_file
from trainleak.releases._schema import Strict, TensorRef, load_tensor_ref, read_mapping, resolve
from trainleak.releases._schema import validate as validate_schema
from trainleak.releases.classifier import GenerativePrior
from trainleak.releases.knowledge import Knowledge


class RecordsRef(Strict):
    """Other records: one file with an inputs tensor and a labels tensor."""

    file: str
    x: str = "x"
    y: str = "y"


class KnowledgeSchema(Strict):
    input_shape: list[int] | None = Field(None, min_length=1)
    value_range: list[float] | None = Field(None, min_length=2, max_length=2)
    label_set: list[int] | None = Field(None, min_length=1)
    labels: list[int] | str | TensorRef | None = None
    n_records: int | None = Field(None, ge=1)
    prior: str | TensorRef | None = None
    other_records: RecordsRef | None = None
    auxiliary: RecordsRef | None = None
    generative_prior: str | None = None
    active: bool = False
    subspace_basis: str | TensorRef | None = None
    record_norm: float | None = Field(None, gt=0)
    candidate_texts: list[str] | str | None = None


def load_knowledge(path: str | Path) -> Knowledge:
    """Read and validate a knowledge file.

    Raises:
        DataNotFoundError: the file, or a tensor file it names, does not exist.
        MalformedFileError: the file does not parse.
        MetadataError: an unknown key, a mistyped value, or values that contradict each other
            (a prior whose records do not have ``input_shape``, an empty value range, ...).
        NonFiniteWeightsError: a tensor it names holds NaN or infinite values.
    """
    p = Path(path)
    s = validate_schema(KnowledgeSchema, read_mapping(p, "knowledge file"), p)
    shape = tuple(s.input_shape) if s.input_shape is not None else None
    if shape is not None and any(d < 1 for d in shape):
        raise MetadataError(p, "input_shape", f"sizes must be positive, received {list(shape)}")
    value_range = _value_range(s, p)
    prior = _records(load_tensor_ref(s.prior, p, "prior"), shape, p, "prior") if s.prior else None
    basis = load_tensor_ref(s.subspace_basis, p, "subspace_basis") if s.subspace_basis else None
    if basis is not None and basis.ndim != 2:
        raise MetadataError(p, "subspace_basis", f"a (d, s) matrix, shape {tuple(basis.shape)}")
    return Knowledge(
        input_shape=shape,
        value_range=value_range,
        label_set=tuple(s.label_set) if s.label_set is not None else None,
        labels=_labels(s, p),
        n_records=s.n_records,
        prior=prior,
        other_records=_other_records(s.other_records, shape, p),
        auxiliary=_other_records(s.auxiliary, shape, p, "auxiliary"),
        generative_prior=_prior(s.generative_prior, p),
        active=s.active,
        subspace_basis=basis,
        record_norm=s.record_norm,
        candidate_texts=_texts(s.candidate_texts, p),
    )


def read_texts(path: Path, what: str) -> tuple[str, ...]:
    """The non-empty lines of a UTF-8 text file, stripped (one text a line).

    Raises:
        DataNotFoundError: the file does not exist.
        MalformedFileError: it is not UTF-8 text.
        MetadataError: it holds no text.
    """
    if not path.is_file():
        raise DataNotFoundError(f"{path} does not exist ({what})")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise MalformedFileError(path, "", f"not UTF-8 text ({exc})") from None
    texts = tuple(t.strip() for t in lines if t.strip())
    if not texts:
        raise MetadataError(path, "", f"no text in {what}")
    return texts


def _texts(value: list[str] | str | None, p: Path) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return read_texts(resolve(p, value), "candidate_texts: one text a line")
    texts = tuple(t.strip() for t in value)
    if not texts or not all(texts):
        raise MetadataError(p, "candidate_texts", "a non-empty list of non-empty texts")
    return texts


def _prior(folder: str | None, p: Path) -> GenerativePrior | None:
    if folder is None:
        return None
    where = resolve(p, folder)
    try:
        return GenerativePrior.load(where)
    except (ConfigError, ShapeError, KeyError, TypeError) as exc:
        raise MetadataError(p, "generative_prior", f"{where}: {exc}") from None


def _value_range(s: KnowledgeSchema, p: Path) -> tuple[float, float] | None:
    if s.value_range is None:
        return None
    lo, hi = s.value_range
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise MetadataError(p, "value_range", f"finite [low, high] with low < high, got {[lo, hi]}")
    return (lo, hi)


def _labels(s: KnowledgeSchema, p: Path) -> torch.Tensor | None:
    if s.labels is None:
        return None
    if isinstance(s.labels, list):
        return torch.tensor(s.labels, dtype=torch.long)
    t = load_tensor_ref(s.labels, p, "labels")
    if t.ndim != 1 or t.is_floating_point():
        raise MetadataError(p, "labels", f"a 1-D integer tensor, got {t.dtype} {tuple(t.shape)}")
    return t.long()


def _records(t: torch.Tensor, shape: tuple[int, ...] | None, p: Path, field: str) -> torch.Tensor:
    if not t.is_floating_point() or t.ndim < 2:
        raise MetadataError(p, field, f"a floating (N, ...) tensor, got {t.dtype} {tuple(t.shape)}")
    if shape is not None and tuple(t.shape[1:]) != shape and t[0].numel() != math.prod(shape):
        raise MetadataError(
            p, field, f"records of shape {tuple(t.shape[1:])}, but input_shape is {list(shape)}"
        )
    return t.reshape(t.shape[0], *shape) if shape is not None else t


def _other_records(
    ref: RecordsRef | None, shape: tuple[int, ...] | None, p: Path, field: str = "other_records"
) -> tuple[torch.Tensor, torch.Tensor] | None:
    if ref is None:
        return None
    file = resolve(p, ref.file)
    tensors = read_tensor_file(file)
    for key, name in (("x", ref.x), ("y", ref.y)):
        if name not in tensors:
            raise MetadataError(p, f"{field}.{key}", f"{file} has no tensor {name!r}")
    x = _records(tensors[ref.x], shape, p, f"{field}.x")
    y = tensors[ref.y]
    if y.ndim != 1 or y.is_floating_point() or len(y) != len(x):
        raise MetadataError(
            p, f"{field}.y", f"{len(x)} integer labels, got {y.dtype} {tuple(y.shape)}"
        )
    return x, y.long()
