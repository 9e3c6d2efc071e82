"""Checking tensors read from a user's file against the model spec that claims to describe them.

The architecture is built on the ``meta`` device, so no memory is allocated for its weights
(a spec naming a model far too large is refused by its shapes, not by running out of memory).
"""

from __future__ import annotations

from pathlib import Path

import torch

from trainleak.errors import ConfigError, MetadataError, SpecMismatchError
from trainleak.models.registry import available_models, build_model
from trainleak.models.spec import ModelSpec, StateDict

DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}


def expected_tensors(spec: ModelSpec, spec_file: Path) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor of ``spec``'s state dict (built on the meta device).

    Raises:
        MetadataError: an unknown kind, or keywords the architecture refuses.
    """
    if spec.kind not in available_models():
        raise MetadataError(
            spec_file, "architecture.kind", f"unknown {spec.kind!r}; known: {available_models()}"
        )
    try:
        with torch.device("meta"):
            model = build_model(spec, seed=0)
    except (ConfigError, TypeError, ValueError) as exc:
        raise MetadataError(spec_file, "architecture.kwargs", str(exc)) from None
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def rename(tensors: StateDict, names: dict[str, str], file: Path) -> StateDict:
    """Apply ``tensor_names`` (trainleak name -> name in the file) to ``tensors``."""
    out = dict(tensors)
    for ours, theirs in names.items():
        if theirs not in out:
            raise SpecMismatchError(
                file, theirs, f"named in tensor_names (for {ours!r}) but absent from the file"
            )
        out[ours] = out.pop(theirs)
    return out


def match_spec(
    tensors: StateDict,
    expected: dict[str, tuple[int, ...]],
    spec: ModelSpec,
    file: Path,
    dtype: torch.dtype | None,
) -> torch.dtype:
    """Check names, shapes and dtypes of ``tensors`` against ``expected``; return the dtype.

    Args:
        tensors: the file's tensors (after renaming).
        expected: from :func:`expected_tensors`.
        spec: the architecture (for messages).
        file: the tensor file (named in every error).
        dtype: the dtype the spec declares (or that an earlier file had), if any.

    Raises:
        SpecMismatchError: naming the file and the tensor at fault.
    """
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise SpecMismatchError(
            file,
            missing[0],
            f"missing; architecture {spec.kind!r} needs {sorted(expected)}, the file has "
            f"{sorted(tensors)[:12]} (map names with tensor_names)",
        )
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise SpecMismatchError(
            file, extra[0], f"not a tensor of architecture {spec.kind!r} ({sorted(expected)})"
        )
    for name, shape in expected.items():
        got = tuple(tensors[name].shape)
        if got != shape:
            raise SpecMismatchError(
                file,
                name,
                f"shape {got}, but the spec ({spec.kind}, {_kwargs(spec)}) expects {shape}"
                + _width_hint(tensors),
            )
    return _common_dtype({k: tensors[k] for k in expected}, file, dtype)


def _common_dtype(tensors: StateDict, file: Path, declared: torch.dtype | None) -> torch.dtype:
    first: tuple[str, torch.dtype] | None = None
    for name, t in tensors.items():
        if not t.is_floating_point():
            raise SpecMismatchError(file, name, f"dtype {t.dtype}; weights must be floating point")
        if declared is not None and t.dtype != declared:
            raise SpecMismatchError(
                file, name, f"dtype {t.dtype}, but the spec declares {declared}"
            )
        if first is not None and t.dtype != first[1]:
            raise SpecMismatchError(
                file, name, f"dtype {t.dtype}, but {first[0]!r} is {first[1]}: one dtype for all"
            )
        first = first or (name, t.dtype)
    if first is None:
        raise SpecMismatchError(file, "", "the file holds no tensors")
    return first[1]


def _kwargs(spec: ModelSpec) -> str:
    return ", ".join(f"{k}={v}" for k, v in spec.kwargs.items())


def _width_hint(tensors: StateDict) -> str:
    """For MLP-shaped files: the input size and widths the tensors themselves imply."""
    weights = []
    i = 0
    while f"layers.{i}.weight" in tensors and tensors[f"layers.{i}.weight"].ndim == 2:
        weights.append(tensors[f"layers.{i}.weight"])
        i += 1
    if not weights:
        return ""
    hidden = [int(w.shape[0]) for w in weights[:-1]]
    return (
        f"; the file's layers imply input size {int(weights[0].shape[1])}, hidden widths "
        f"{hidden} and {int(weights[-1].shape[0])} outputs"
    )
