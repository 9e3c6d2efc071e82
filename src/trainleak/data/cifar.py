"""CIFAR-10 from ConvNetJS PNG sprites or from the official python batches."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from PIL import Image

from trainleak.data._files import (
    check_limit,
    corrupt_error,
    missing_error,
    resolve_data_dir,
)
from trainleak.data._safe_pickle import safe_load
from trainleak.data._types import CIFAR10_CLASSES, ImageDataset
from trainleak.errors import UnsafeFileError
from trainleak.validation import check_choice

_PY_FOLDER = "cifar-10-batches-py"
_SPRITE_ROWS = 1000  # images per PNG sprite
_N_TRAIN, _TEST_OFFSET = 50000, 50000


def _read_sprite(path: Path) -> np.ndarray:
    """One ConvNetJS sprite -> (1000, 3, 32, 32) uint8."""
    try:
        with Image.open(path) as im:
            im.load()
            mode, size, arr = im.mode, im.size, np.asarray(im)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise corrupt_error(path, f"not a readable PNG ({exc})") from exc
    if mode != "RGB" or size != (1024, _SPRITE_ROWS):
        raise corrupt_error(path, f"{mode} image of size {size}, expected RGB 1024 x 1000")
    return arr.reshape(_SPRITE_ROWS, 32, 32, 3).transpose(0, 3, 1, 2)


def _read_labels(path: Path, start: int, n: int) -> np.ndarray:
    try:
        values = np.array(path.read_text(encoding="ascii").split(), dtype=np.int64)
    except (UnicodeDecodeError, ValueError) as exc:
        raise corrupt_error(path, f"expected one integer label per line ({exc})") from exc
    if len(values) < start + n:
        raise corrupt_error(path, f"{len(values)} labels, need at least {start + n}")
    values = values[start : start + n]
    if n and (values.min() < 0 or values.max() > 9):
        raise corrupt_error(path, "labels outside 0..9")
    return values


def _load_sprites(folder: Path, split: str, want: int) -> tuple[np.ndarray, np.ndarray]:
    labels_path = folder / "cifar10_labels.txt"
    if not labels_path.is_file():
        raise missing_error(labels_path.name, [folder])
    if split == "test":
        first, count = _TEST_OFFSET // _SPRITE_ROWS, 1
    else:
        first, count = 0, math.ceil(want / _SPRITE_ROWS)
    chunks: list[np.ndarray] = []
    for k in range(first, first + count):
        path = folder / f"cifar10_batch_{k}.png"
        if not path.is_file():
            if chunks:  # a partial copy: use the consecutive sprites that are there
                break
            raise missing_error(path.name, [folder])
        chunks.append(_read_sprite(path))
    images = np.concatenate(chunks)[:want]
    start = _TEST_OFFSET if split == "test" else 0
    return images, _read_labels(labels_path, start, len(images))


def _field(batch: dict[Any, Any], key: str) -> Any:
    for k in (key.encode(), key):
        if k in batch:
            return batch[k]
    raise KeyError(key)


def _unpickle_batch(path: Path) -> dict[Any, Any]:
    """The batch's dict; anything a malformed pickle raises becomes CorruptDataError."""
    try:
        batch = safe_load(path)
    except UnsafeFileError:
        raise
    except (Exception, RecursionError) as exc:  # a pickle parser can fail in many ways
        raise corrupt_error(path, f"not a CIFAR-10 python batch ({exc!r})") from exc
    if not isinstance(batch, dict):
        raise corrupt_error(
            path, f"it unpickles to {type(batch).__name__}, expected a dict of 'data' and 'labels'"
        )
    return batch


def _read_py_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One official python batch -> ((N, 3, 32, 32) uint8, (N,) int64), safely unpickled."""
    batch = _unpickle_batch(path)
    try:
        data, labels = _field(batch, "data"), np.asarray(_field(batch, "labels"))
    except (KeyError, ValueError, TypeError) as exc:
        raise corrupt_error(path, f"not a CIFAR-10 python batch ({exc!r})") from exc
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2):
        raise corrupt_error(path, "'data' is not a 2-D uint8 array")
    if data.shape[1] != 3072 or labels.shape != (data.shape[0],) or labels.dtype.kind not in "iu":
        raise corrupt_error(
            path, f"data {data.shape} and labels {labels.shape}, expected (N, 3072) and (N,)"
        )
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise corrupt_error(path, "labels outside 0..9")
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def _load_py_batches(folder: Path, split: str, want: int) -> tuple[np.ndarray, np.ndarray]:
    names = ["test_batch"] if split == "test" else [f"data_batch_{i}" for i in range(1, 6)]
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    have = 0
    for name in names:
        if have >= want:
            break
        if not (folder / name).is_file():
            raise missing_error(name, [folder])
        x, y = _read_py_batch(folder / name)
        xs.append(x)
        ys.append(y)
        have += len(x)
    return np.concatenate(xs)[:want], np.concatenate(ys)[:want]


def load_cifar10(
    split: Literal["train", "test"] = "train",
    data_dir: str | Path | None = None,
    limit: int | None = None,
) -> ImageDataset:
    """Load CIFAR-10 from ``<data_dir>/cifar10``; nothing is downloaded.

    Two layouts are read, the first found wins:

    * ``cifar-10-batches-py/`` (``data_batch_1`` .. ``data_batch_5``, ``test_batch``), the
      official python release, in ``<data_dir>/cifar10`` or ``<data_dir>``. These are pickles;
      they are read with a restricted unpickler that rebuilds numpy arrays and refuses
      anything else with :class:`~trainleak.errors.UnsafeFileError`.
    * ConvNetJS sprites ``cifar10_batch_{k}.png`` plus ``cifar10_labels.txt``: sprite ``k``
      (``k < 50``) holds train images ``1000k .. 1000k+999``, sprite 50 the first 1000 test
      images. A partial copy is fine: the train split uses sprites 0, 1, ... up to the first
      one missing.

    Args:
        split: ``"train"`` or ``"test"``.
        data_dir: the data root; ``None`` reads ``$TRAINLEAK_DATA``.
        limit: keep at most the first ``limit`` images. A warning is issued when the files
            hold fewer than an explicit ``limit``.

    Returns:
        ``ImageDataset`` named ``"cifar10-<split>"``, ``x`` of shape ``(N, 3, 32, 32)`` in
        ``[0, 1]``, with the ten CIFAR-10 class names.

    Raises:
        ConfigError: for an unknown split or a bad ``limit``.
        DataNotFoundError: if the files are missing; ``CorruptDataError`` if one is damaged.
        UnsafeFileError: if a python batch references anything but numpy array globals.

    References:
        Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", 2009.
    """
    check_choice("split", split, ("train", "test"))
    check_limit(limit)
    root = resolve_data_dir(data_dir)
    want = limit if limit is not None else (_N_TRAIN if split == "train" else 10000)
    folders = [root / "cifar10", root]
    py = next((f / _PY_FOLDER for f in folders if (f / _PY_FOLDER).is_dir()), None)
    sprite_files = ("cifar10_labels.txt", "cifar10_batch_0.png", "cifar10_batch_50.png")
    sprites = next((f for f in folders if any((f / n).is_file() for n in sprite_files)), None)
    if py is not None:
        images, labels = _load_py_batches(py, split, want)
    elif sprites is not None:
        images, labels = _load_sprites(sprites, split, want)
    else:
        raise missing_error(f"{_PY_FOLDER}/ or cifar10_labels.txt + cifar10_batch_*.png", folders)
    if limit is not None and len(images) < limit:
        warnings.warn(
            f"CIFAR-10 {split}: limit={limit} but the files hold only {len(images)} images",
            stacklevel=2,
        )
    x = torch.from_numpy(images.astype(np.float32)).div_(255.0)
    return ImageDataset(f"cifar10-{split}", x, torch.from_numpy(labels), CIFAR10_CLASSES)
