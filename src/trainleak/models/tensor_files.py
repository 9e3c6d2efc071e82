"""Reading tensors from files a user hands in, safely and with errors that name the fault.

Two formats are read, each recognised by its content, never by its name alone:

* **safetensors**: 8 bytes little-endian header length ``N``, then ``N`` bytes of JSON
  (``{name: {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}``), then the data. The
  header is checked before anything is parsed or mapped: ``N`` against the file size, the JSON,
  every entry's dtype, shape and offsets against the data size, and that the entries tile the
  data exactly. A header length whose first byte is ``0x80`` is still safetensors (the JSON at
  byte 8 decides), so such a file is never mistaken for a pickle.
* **torch zip archives** (``torch.save``'s format since 1.6), read with
  ``torch.load(weights_only=True)``, which unpickles tensors and plain containers only.

Everything else is refused: a Python pickle (or a legacy torch file, which is one) could run
arbitrary code when loaded.

References:
    The safetensors format: https://github.com/huggingface/safetensors (README, "Format").
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from trainleak.errors import (
    DataNotFoundError,
    MalformedFileError,
    NonFiniteWeightsError,
    UnsafeFileError,
)

MAX_HEADER = 100_000_000  # the safetensors library's own limit on the header length
ZIP_MAGIC = b"PK\x03\x04"
PICKLE_SUFFIXES = {".pkl", ".pickle", ".joblib", ".npy", ".npz"}
ITEM_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


def sniff(path: Path) -> str:
    """``"safetensors"``, ``"torch-zip"``, ``"pickle"`` or ``"unknown"``, from the content.

    A file is safetensors when byte 8 opens a JSON object and the first 8 bytes read as a
    plausible header length, or when it is named ``*.safetensors`` (then a bad header is
    reported as such, not as an unknown format).
    """
    with path.open("rb") as fh:
        head = fh.read(9)
    if len(head) == 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < MAX_HEADER:
        return "safetensors"
    if path.suffix == ".safetensors":
        return "safetensors"
    if head.startswith(ZIP_MAGIC):
        return "torch-zip"
    if head[:1] == b"\x80" or path.suffix in PICKLE_SUFFIXES:
        return "pickle"
    return "unknown"


def read_tensor_file(path: str | Path, *, finite: bool = True) -> dict[str, torch.Tensor]:
    """Read a flat ``{name: tensor}`` mapping from a safetensors file or a torch zip archive.

    Args:
        path: the file.
        finite: also refuse NaN and infinite values in floating tensors.

    Raises:
        DataNotFoundError: the file does not exist.
        MalformedFileError: a truncated or lying safetensors header, offsets beyond the data,
            malformed header JSON, a damaged archive, or contents other than named tensors.
        UnsafeFileError: a pickle, a legacy torch file, an unrecognised format, or a torch file
            whose contents need unpickling arbitrary objects.
        NonFiniteWeightsError: with ``finite``, a tensor holding NaN or infinite values.
    """
    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(f"tensor file {str(p)!r} does not exist")
    kind = sniff(p)
    if kind == "safetensors":
        check_safetensors_header(p)
        try:
            tensors = dict(load_file(str(p)))
        except (SafetensorError, OSError, ValueError) as exc:
            raise MalformedFileError(p, "", f"unreadable safetensors file ({exc})") from None
    elif kind == "torch-zip":
        tensors = _read_torch_zip(p)
    else:
        raise UnsafeFileError(
            f"refusing to load {p}: it is "
            + ("a Python pickle" if kind == "pickle" else "neither safetensors nor a torch zip")
            + ", and unpickling can run arbitrary code; save the weights with safetensors (or "
            "torch.save of a plain state dict, read with weights_only=True)"
        )
    if finite:
        check_finite(tensors, p)
    return tensors


def check_safetensors_header(p: Path) -> dict[str, Any]:
    """Validate a safetensors header against the file before any parsing of the data.

    Returns:
        The parsed header (entries and ``__metadata__``).

    Raises:
        MalformedFileError: naming the file and the header field at fault.
    """
    size = p.stat().st_size
    if size < 8:
        raise MalformedFileError(p, "header length", f"truncated: {size} bytes, fewer than 8")
    with p.open("rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        if n > size - 8 or n > MAX_HEADER:
            raise MalformedFileError(
                p, "header length", f"says {n} bytes, but the file has {size - 8} after it"
            )
        raw = fh.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedFileError(p, "header", f"not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise MalformedFileError(p, "header", f"a JSON {type(header).__name__}, not an object")
    _check_entries(p, header, size - 8 - n)
    return header


def _check_entries(p: Path, header: dict[str, Any], data_size: int) -> None:
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
    ):
        raise MalformedFileError(p, "__metadata__", "must map strings to strings")
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        spans.append((*_entry_span(p, name, entry, data_size), name))
    spans.sort()
    end = 0
    for begin, stop, name in spans:
        if begin != end:
            what = "overlaps another tensor" if begin < end else f"leaves a gap at byte {end}"
            raise MalformedFileError(p, f"{name}.data_offsets", what)
        end = stop
    if end != data_size:
        raise MalformedFileError(
            p, "data_offsets", f"the tensors cover {end} bytes, but the data has {data_size}"
        )


def _entry_span(p: Path, name: str, entry: Any, data_size: int) -> tuple[int, int]:
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise MalformedFileError(p, name, "expected exactly dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in ITEM_SIZES:
        raise MalformedFileError(p, f"{name}.dtype", f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_nonneg_int(s) for s in shape):
        raise MalformedFileError(p, f"{name}.shape", f"not a list of sizes: {shape!r}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_nonneg_int(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise MalformedFileError(p, f"{name}.data_offsets", f"not [begin, end]: {offsets!r}")
    begin, stop = offsets
    if stop > data_size:
        raise MalformedFileError(
            p, f"{name}.data_offsets", f"end {stop} lies beyond the {data_size} bytes of data"
        )
    if stop - begin != math.prod(shape) * ITEM_SIZES[dtype]:
        raise MalformedFileError(
            p,
            f"{name}.data_offsets",
            f"span of {stop - begin} bytes, but shape {shape} of {dtype} needs "
            f"{math.prod(shape) * ITEM_SIZES[dtype]}",
        )
    return begin, stop


def _nonneg_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _read_torch_zip(p: Path) -> dict[str, torch.Tensor]:
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UnsafeFileError(
            f"refusing to load {p}: it holds objects other than tensors, and loading them would "
            f"unpickle arbitrary code ({type(exc).__name__}); re-save it as safetensors"
        ) from None
    except Exception as exc:  # a damaged archive: torch raises RuntimeError, EOFError, ...
        raise MalformedFileError(p, "", f"unreadable torch file ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise MalformedFileError(p, "", f"holds a {type(obj).__name__}, not a dict of tensors")
    for key, value in obj.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise MalformedFileError(
                p, str(key), f"a {type(value).__name__}; expected a flat dict of named tensors"
            )
    return dict(obj)


def check_finite(tensors: dict[str, torch.Tensor], file: str | Path, prefix: str = "") -> None:
    """Raise :class:`NonFiniteWeightsError` naming the first tensor with NaN or inf values."""
    for name, t in tensors.items():
        if t.is_floating_point() or t.is_complex():
            bad = ~torch.isfinite(t)
            if bool(bad.any()):
                n_nan = int(torch.isnan(t).sum())
                raise NonFiniteWeightsError(
                    file,
                    prefix + name,
                    f"{n_nan} NaN and {int(bad.sum()) - n_nan} infinite values out of {t.numel()}",
                )
