"""Offline data sets and helpers; nothing here ever downloads.

Files are found under an explicit ``data_dir``, else under ``$TRAINLEAK_DATA``; a missing file
raises :class:`~trainleak.errors.DataNotFoundError` naming the file, the folder searched and
how to supply it. :func:`load_digits` needs no files at all.
"""

from trainleak.data._files import CorruptDataError, resolve_data_dir
from trainleak.data._types import CIFAR10_CLASSES, DIGIT_CLASSES, ImageDataset
from trainleak.data.cifar import load_cifar10
from trainleak.data.faces import load_orl_faces
from trainleak.data.images import DATASET_NAMES, load_dataset, load_digits
from trainleak.data.mnist import load_mnist
from trainleak.data.splits import HeldOutSplit, heldout_split, split_disjoint
from trainleak.data.subsets import (
    balanced_binary,
    balanced_binary_indices,
    balanced_subset,
    binary_task,
)
from trainleak.data.text import load_wikitext2
from trainleak.data.transforms import from_symmetric, to_symmetric

__all__ = [
    "CIFAR10_CLASSES",
    "DATASET_NAMES",
    "DIGIT_CLASSES",
    "CorruptDataError",
    "HeldOutSplit",
    "ImageDataset",
    "balanced_binary",
    "balanced_binary_indices",
    "balanced_subset",
    "binary_task",
    "from_symmetric",
    "heldout_split",
    "load_cifar10",
    "load_dataset",
    "load_digits",
    "load_mnist",
    "load_orl_faces",
    "load_wikitext2",
    "resolve_data_dir",
    "split_disjoint",
    "to_symmetric",
]
