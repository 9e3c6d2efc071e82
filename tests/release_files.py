"""Writing small release files the way a user's own code would (for the release-file tests)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from trainleak.models import build_model, model_spec

SPEC = model_spec("homogeneous_mlp", input_shape=(1, 4, 4), hidden=[8], out_dim=1, first_bias=True)


def weights(seed: int = 0) -> dict[str, torch.Tensor]:
    """Fresh weights of :data:`SPEC` (independent tensors)."""
    model = build_model(SPEC, seed=seed)
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def write_checkpoint(
    folder: Path, tensors: dict[str, torch.Tensor] | None = None, **spec: Any
) -> Path:
    """``weights.safetensors`` + ``release.json`` in ``folder``; ``spec`` overrides keys."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors if tensors is not None else weights(), str(folder / "weights.safetensors"))
    doc: dict[str, Any] = {
        "type": "checkpoint",
        "architecture": {"kind": SPEC.kind, "kwargs": SPEC.kwargs},
        "weights": "weights.safetensors",
    }
    doc.update(spec)
    (folder / "release.json").write_text(json.dumps(doc))
    return folder / "release.json"


def raw_safetensors(path: Path, entries: dict[str, Any], data: bytes, pad_to: int = 0) -> None:
    """A safetensors file written by hand: any header, any data, header padded with spaces."""
    header = json.dumps(entries).encode()
    header += b" " * max(0, pad_to - len(header))
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def tensor_entry(shape: list[int], begin: int, dtype: str = "F32") -> dict[str, Any]:
    size = {"F32": 4, "F64": 8}[dtype]
    n = 1
    for s in shape:
        n *= s
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, begin + n * size]}
