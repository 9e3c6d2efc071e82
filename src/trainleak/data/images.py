"""Zero-setup digits, and one entry point that loads any image data set by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn import datasets as _sk_datasets

from trainleak.data._types import DIGIT_CLASSES, ImageDataset
from trainleak.data.cifar import load_cifar10
from trainleak.data.faces import load_orl_faces
from trainleak.data.mnist import load_mnist
from trainleak.errors import ConfigError

DATASET_NAMES: tuple[str, ...] = ("digits", "mnist", "cifar10", "orl")


def load_digits() -> ImageDataset:
    """Load scikit-learn's bundled 8 x 8 digits (1797 images); needs no data folder.

    Returns:
        ``ImageDataset`` named ``"digits"``, ``x`` of shape ``(1797, 1, 8, 8)`` equal to the
        16-level pixels divided by 16, classes ``"0"`` .. ``"9"``.

    Example:
        >>> ds = load_digits()
        >>> len(ds), ds.input_shape, float(ds.x.max())
        (1797, (1, 8, 8), 1.0)

    References:
        Alpaydin, Kaynak, "Optical Recognition of Handwritten Digits", UCI repository, 1998.
    """
    bunch = _sk_datasets.load_digits()
    x = torch.from_numpy((bunch.images / 16.0).astype(np.float32)).unsqueeze(1)
    y = torch.from_numpy(bunch.target.astype(np.int64))
    return ImageDataset("digits", x, y, DIGIT_CLASSES)


def load_dataset(name: str, data_dir: str | Path | None = None, **kwargs: Any) -> ImageDataset:
    """Load an image data set by name.

    Args:
        name: ``"digits"``, ``"mnist"``, ``"cifar10"`` or ``"orl"``.
        data_dir: the data root (ignored for ``"digits"``); ``None`` reads
            ``$TRAINLEAK_DATA``.
        **kwargs: passed on to the loader, e.g. ``split=`` and ``limit=`` for MNIST and
            CIFAR-10.

    Returns:
        The data set, as the matching ``load_*`` function returns it.

    Raises:
        ConfigError: for an unknown name.
        DataNotFoundError: as raised by the loader.
    """
    if name == "digits":
        return load_digits(**kwargs)
    if name == "mnist":
        return load_mnist(data_dir=data_dir, **kwargs)
    if name == "cifar10":
        return load_cifar10(data_dir=data_dir, **kwargs)
    if name == "orl":
        return load_orl_faces(data_dir=data_dir, **kwargs)
    raise ConfigError.invalid("dataset", f"one of {list(DATASET_NAMES)}", name)
