"""The in-memory image data set every loader returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainleak.errors import ConfigError, ShapeError

DIGIT_CLASSES: tuple[str, ...] = tuple(str(d) for d in range(10))
"""Class names of the digit data sets (digits, MNIST): ``"0"`` .. ``"9"``."""

CIFAR10_CLASSES: tuple[str, ...] = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
"""Class names of CIFAR-10 in label order."""


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """A labelled image data set held in memory.

    Attributes:
        name: a short identifier, e.g. ``"mnist-train"``.
        x: images, shape ``(N, C, H, W)``, dtype float32, values in ``[0, 1]``.
        y: labels, shape ``(N,)``, dtype int64, values in ``[0, len(classes))``.
        classes: the class names; label ``k`` is ``classes[k]``.

    Raises:
        ShapeError: if ``x`` is not 4-D or ``y`` is not 1-D of the same length.
        ConfigError: if a dtype is wrong or a label is outside ``[0, len(classes))``.

    Example:
        >>> import torch
        >>> y = torch.tensor([0, 1, 1, 0])
        >>> ds = ImageDataset("toy", torch.zeros(4, 1, 2, 2), y, ("a", "b"))
        >>> len(ds), ds.input_shape, ds.num_classes
        (4, (1, 2, 2), 2)
        >>> ds.subset([1, 2]).y.tolist()
        [1, 1]
    """

    name: str
    x: torch.Tensor
    y: torch.Tensor
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.x.ndim != 4:
            raise ShapeError(f"ImageDataset.x must be (N, C, H, W), received {tuple(self.x.shape)}")
        if self.y.ndim != 1 or self.y.shape[0] != self.x.shape[0]:
            raise ShapeError(
                f"ImageDataset.y must be ({self.x.shape[0]},) to match x, "
                f"received {tuple(self.y.shape)}"
            )
        if self.x.dtype != torch.float32:
            raise ConfigError.invalid("ImageDataset.x.dtype", "torch.float32", self.x.dtype)
        if self.y.dtype != torch.int64:
            raise ConfigError.invalid("ImageDataset.y.dtype", "torch.int64", self.y.dtype)
        if len(self.y) and (int(self.y.min()) < 0 or int(self.y.max()) >= len(self.classes)):
            raise ConfigError.invalid(
                "ImageDataset.y",
                f"labels in [0, {len(self.classes)})",
                f"labels in [{int(self.y.min())}, {int(self.y.max())}]",
            )

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def __repr__(self) -> str:
        return (
            f"ImageDataset(name={self.name!r}, n={len(self)}, "
            f"input_shape={self.input_shape}, classes={len(self.classes)})"
        )

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one image, ``(C, H, W)``."""
        return tuple(int(s) for s in self.x.shape[1:])

    @property
    def num_classes(self) -> int:
        """The number of classes, ``len(classes)``."""
        return len(self.classes)

    def subset(self, idx: torch.Tensor | Sequence[int]) -> ImageDataset:
        """Select samples by index (or boolean mask), keeping name and classes.

        Args:
            idx: integer indices (negative ones count from the end) or a boolean mask of
                length ``len(self)``.

        Returns:
            A new data set holding copies of the selected samples, in the order of ``idx``.

        Raises:
            ConfigError: if an index is out of range or a mask has the wrong length.
        """
        index = torch.as_tensor(idx)
        if index.dtype == torch.bool:
            if index.shape != (len(self),):
                raise ConfigError.invalid("idx", f"a boolean mask of shape ({len(self)},)", index)
            index = index.nonzero().flatten()
        index = index.to(torch.int64).flatten()
        n = len(self)
        if len(index) and (int(index.min()) < -n or int(index.max()) >= n):
            bad = int(index.min()) if int(index.min()) < -n else int(index.max())
            raise ConfigError.invalid("idx", f"indices in [-{n}, {n})", bad)
        return ImageDataset(self.name, self.x[index], self.y[index], self.classes)
