"""Robust JSON for results: numpy and torch values, NaN and infinities, dataclasses, paths.

Rules: mappings keep their keys (as strings); sequences, sets, numpy arrays and torch tensors
become lists; numpy and torch scalars become Python numbers; NaN becomes ``null``; ``inf`` and
``-inf`` become the strings ``"inf"`` and ``"-inf"`` (strict JSON has no infinities, and a PSNR of
``inf`` means "identical", not "missing"); dataclasses and pydantic models become dicts; paths
and anything else become strings.

Example:
    >>> import numpy as np
    >>> dumps({"a": np.float32(0.5), "b": [float("nan"), float("inf")], "c": np.arange(2)})
    '{"a": 0.5, "b": [null, "inf"], "c": [0, 1]}'
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import numpy as np


def to_jsonable(obj: Any) -> Any:
    """Convert ``obj`` to plain JSON values (see the module docstring for the rules)."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, np.generic | np.ndarray) or _is_tensor(obj):
        return _array(obj)
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
        return [to_jsonable(v) for v in items]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if hasattr(obj, "model_dump"):
        return to_jsonable(obj.model_dump(mode="json"))
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, PurePath):
        return str(obj)
    return str(obj)


def _float(x: float) -> Any:
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _is_tensor(obj: Any) -> bool:
    # torch is looked up, not imported: no tensor exists unless its code already imported it
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _array(x: Any) -> Any:
    if _is_tensor(x):
        torch = sys.modules["torch"]
        x = x.detach().cpu()
        x = x.numpy() if x.dtype != torch.bfloat16 else x.float().numpy()
    value = np.asarray(x).tolist()  # numpy scalars and arrays -> Python numbers and lists
    return to_jsonable(value)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """``json.dumps`` of :func:`to_jsonable` (strict JSON, never ``NaN``)."""
    return json.dumps(to_jsonable(obj), indent=indent, allow_nan=False)
