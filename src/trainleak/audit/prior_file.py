"""Train the adversary's generative prior from a file of public images (``trainleak prior``).

Model inversion of a classifier (seeds 3 and 8) searches the latent space of a generative
prior trained on public images of *other* classes from the same domain. A user auditing their
own classifier has such images (a public data set, or their own data of classes the model does
not know) but not a prior; :func:`prior_from_file` trains the library's VAE on them
(:func:`trainleak.systems.classifier.train_prior`) and the knowledge file then names the saved
folder (``generative_prior: prior/``).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from trainleak.errors import MetadataError, SpecMismatchError
from trainleak.models.tensor_files import read_tensor_file
from trainleak.progress import Progress
from trainleak.releases.classifier import GenerativePrior
from trainleak.systems.classifier import PriorSettings, train_prior

_TOL = 1e-6


def public_images(path: str | Path, tensor: str, value_range: tuple[float, float]) -> torch.Tensor:
    """The ``(N, C, H, W)`` images named ``tensor`` in ``path``, checked against the range.

    Raises:
        DataNotFoundError: the file does not exist.
        SpecMismatchError: no such tensor, not a floating ``(N, C, H, W)`` batch with C in
            (1, 3), fewer than two images, non-finite values, or values outside the range.
        MetadataError: an empty or non-finite value range.
    """
    file = Path(path)
    lo, hi = value_range
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise MetadataError(file, "value_range", f"finite low < high, received {[lo, hi]}")
    tensors = read_tensor_file(file)
    if tensor not in tensors:
        raise SpecMismatchError(file, tensor, f"no tensor {tensor!r}; found {sorted(tensors)}")
    x = tensors[tensor]
    if not x.is_floating_point() or x.ndim != 4 or x.shape[1] not in (1, 3) or len(x) < 2:
        raise SpecMismatchError(
            file,
            tensor,
            f"expected at least two floating images (N, C, H, W) with C 1 or 3, got {x.dtype} "
            f"{tuple(x.shape)}",
        )
    if not bool(torch.isfinite(x).all()):
        raise SpecMismatchError(file, tensor, "NaN or infinite values")
    tol = _TOL * (hi - lo)
    if float(x.min()) < lo - tol or float(x.max()) > hi + tol:
        raise SpecMismatchError(
            file,
            tensor,
            f"values in [{float(x.min()):.4g}, {float(x.max()):.4g}], outside the value range "
            f"[{lo}, {hi}]",
        )
    return x.float()


def prior_from_file(
    path: str | Path,
    *,
    tensor: str = "x",
    value_range: tuple[float, float] = (0.0, 1.0),
    settings: PriorSettings | None = None,
    public_classes: tuple[str, ...] = (),
    seed: int = 0,
    progress: Progress | None = None,
) -> GenerativePrior:
    """Train the prior (the VAE by default, ``settings.kind``) on the public images in ``path``
    (see :func:`public_images`)."""
    x = public_images(path, tensor, value_range)
    return train_prior(
        x,
        settings or PriorSettings(),
        value_range=value_range,
        public_classes=public_classes,
        seed=seed,
        progress=progress,
    )
