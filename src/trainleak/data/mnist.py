"""MNIST from the standard IDX files, parsed with numpy."""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from trainleak.data._files import check_limit, corrupt_error, find_file, resolve_data_dir
from trainleak.data._types import DIGIT_CLASSES, ImageDataset
from trainleak.validation import check_choice

_IDX_UBYTE = 0x0800  # magic = 0x0800 | ndim for unsigned-byte IDX arrays


def read_idx(path: Path, ndim: int) -> np.ndarray:
    """Read an unsigned-byte IDX array (gzipped or not) and check its header and size.

    Args:
        path: the ``.gz`` or uncompressed IDX file.
        ndim: the number of dimensions the file must have (3 for images, 1 for labels).

    Returns:
        A read-only uint8 array of the shape stored in the header.

    Raises:
        CorruptDataError: if the file cannot be decompressed, the magic number is wrong or
            the size does not match the header.
    """
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            raw = path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        raise corrupt_error(path, f"cannot decompress ({exc})") from exc
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise corrupt_error(path, f"{len(raw)} bytes, shorter than the {header}-byte IDX header")
    magic = int.from_bytes(raw[:4], "big")
    if magic != _IDX_UBYTE | ndim:
        raise corrupt_error(
            path, f"IDX magic number {magic:#06x}, expected {_IDX_UBYTE | ndim:#06x}"
        )
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, offset=4))
    expected = header + math.prod(shape)  # Python integers: a lying header cannot overflow
    if len(raw) != expected:
        raise corrupt_error(
            path, f"{len(raw)} bytes, but its header {shape} needs {expected} (truncated?)"
        )
    return np.frombuffer(raw, np.uint8, offset=header).reshape(shape)


def _idx_file(root: Path, stem: str) -> Path:
    names = [f"{stem}.gz", stem, stem.replace("-idx", ".idx")]
    return find_file(root, "mnist", names)


def load_mnist(
    split: Literal["train", "test"] = "train",
    data_dir: str | Path | None = None,
    limit: int | None = None,
) -> ImageDataset:
    """Load MNIST from ``<data_dir>/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``.

    The uncompressed IDX files are accepted too. Nothing is downloaded.

    Args:
        split: ``"train"`` (60000 images) or ``"test"`` (10000 images).
        data_dir: the data root; ``None`` reads ``$TRAINLEAK_DATA``.
        limit: keep at most the first ``limit`` images (in file order).

    Returns:
        ``ImageDataset`` named ``"mnist-<split>"``, ``x`` of shape ``(N, 1, 28, 28)`` in
        ``[0, 1]``, classes ``"0"`` .. ``"9"``.

    Raises:
        ConfigError: for an unknown split or a bad ``limit``.
        DataNotFoundError: if a file is missing; ``CorruptDataError`` if one is damaged.

    References:
        LeCun, Bottou, Bengio, Haffner, "Gradient-based learning applied to document
        recognition", Proc. IEEE 1998.
    """
    check_choice("split", split, ("train", "test"))
    check_limit(limit)
    root = resolve_data_dir(data_dir)
    prefix = "train" if split == "train" else "t10k"
    images_path = _idx_file(root, f"{prefix}-images-idx3-ubyte")
    labels_path = _idx_file(root, f"{prefix}-labels-idx1-ubyte")
    images = read_idx(images_path, 3)
    labels = read_idx(labels_path, 1)
    if images.shape[0] != labels.shape[0]:
        raise corrupt_error(
            labels_path, f"{labels.shape[0]} labels for {images.shape[0]} images in {images_path}"
        )
    if labels.size and labels.max() > 9:
        raise corrupt_error(labels_path, f"label {int(labels.max())} outside 0..9")
    n = images.shape[0] if limit is None else min(limit, images.shape[0])
    x = torch.from_numpy(images[:n].astype(np.float32)).div_(255.0).unsqueeze(1)
    y = torch.from_numpy(labels[:n].astype(np.int64))
    return ImageDataset(f"mnist-{split}", x, y, DIGIT_CLASSES)
