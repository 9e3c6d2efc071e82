"""A reconstruction grid: each training image above its matched reconstruction.

By default the grid is labelled (:mod:`.labelled_grid`): every row of originals is marked
"original", every row of matches "reconstruction", and each pair carries its SSIM, so a grid
can never be misread. ``labels=False`` gives the bare tiles.

Example:
    >>> import torch
    >>> from trainleak.metrics.matching import evaluate_reconstruction
    >>> x = torch.rand(5, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    >>> grid = reconstruction_grid(x, x, evaluate_reconstruction(x, x), n=4, cols=2, labels=False)
    >>> grid.shape, grid.dtype.name
    ((35, 19), 'uint8')
    >>> reconstruction_grid(x, x, evaluate_reconstruction(x, x), n=4, cols=2).ndim  # RGB, text
    3
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from trainleak.errors import ConfigError, ShapeError
from trainleak.metrics.image import as_image_batch, minmax_normalize
from trainleak.metrics.labelled_grid import labelled_pairs
from trainleak.metrics.matching import ReconstructionScores


def reconstruction_grid(
    train_x: Tensor,
    recon_x: Tensor,
    scores: ReconstructionScores,
    n: int = 32,
    *,
    cols: int = 8,
    pad: int = 1,
    offset: Tensor | None = None,
    normalize: bool = True,
    image_shape: tuple[int, ...] | None = None,
    labels: bool = True,
    bottom_label: str = "reconstruction",
) -> np.ndarray:
    """Tile the ``n`` best-scored pairs, best first: training image above its reconstruction.

    Args:
        train_x: ``(N, ...)`` training images (the ones ``scores`` was computed on).
        recon_x: ``(m, ...)`` candidates; ``scores.matched`` indexes them.
        scores: from :func:`~trainleak.metrics.evaluate_reconstruction`.
        n: number of pairs shown (at most ``N``), sorted by SSIM descending.
        cols: pairs per grid row.
        pad: white pixels between tiles and around the grid.
        offset: added back to both sets before display (as in the evaluation).
        normalize: min-max normalise every image for display (else values are clipped to
            ``[0, 1]``).
        image_shape: shape of one image, for flat inputs.
        labels: label the rows ("original" / ``bottom_label``) and caption each pair with its
            SSIM (an RGB image, scaled up); ``False``: the bare tiles.
        bottom_label: the label of the reconstruction rows.

    Returns:
        ``uint8`` array: with ``labels`` ``(H, W, 3)``; without, ``(H, W)`` for one channel or
        ``(H, W, 3)`` for three.

    Raises:
        ShapeError: when the sets do not fit ``scores`` or have 2 or more than 3 channels.
    """
    if n < 1 or cols < 1 or pad < 0:
        raise ConfigError.invalid("n/cols/pad", "n >= 1, cols >= 1, pad >= 0", (n, cols, pad))
    train = as_image_batch(train_x, image_shape).double()
    recon = as_image_batch(recon_x, image_shape).double()
    if len(train) != scores.n or train.shape[1] not in (1, 3):
        raise ShapeError(
            f"expected {scores.n} training images with 1 or 3 channels, received "
            f"{tuple(train.shape)}"
        )
    order = torch.argsort(scores.ssim.double(), descending=True, stable=True)[:n]
    top, bottom = train[order], recon[scores.matched[order]]
    if offset is not None:
        top, bottom = top + _fit(offset, top), bottom + _fit(offset, top)
    tiles = torch.stack([top, bottom], dim=1)  # (k, 2, C, H, W)
    tiles = minmax_normalize(tiles.flatten(0, 1)) if normalize else tiles.flatten(0, 1)
    pairs = tiles.clamp(0.0, 1.0).reshape(-1, 2, *train.shape[1:])
    if labels:
        captions = [f"SSIM {float(v):.2f}" for v in scores.ssim[order]]
        return labelled_pairs(pairs, ("original", bottom_label), captions, cols=cols)
    return _tile(pairs, cols, pad)


def _fit(offset: Tensor, like: Tensor) -> Tensor:
    return offset.double().reshape(1, *like.shape[1:])


def _tile(pairs: Tensor, cols: int, pad: int) -> np.ndarray:
    k, _, c, h, w = pairs.shape
    cols = min(cols, k)
    rows = -(-k // cols)
    cell_h, cell_w = 2 * h + pad, w + pad
    canvas = np.ones((c, rows * cell_h + pad, cols * cell_w + pad))
    arr = pairs.numpy()
    for i in range(k):
        y0, x0 = pad + (i // cols) * cell_h, pad + (i % cols) * cell_w
        canvas[:, y0 : y0 + h, x0 : x0 + w] = arr[i, 0]
        canvas[:, y0 + h : y0 + 2 * h, x0 : x0 + w] = arr[i, 1]
    out = np.round(canvas * 255).astype(np.uint8)
    return out[0] if c == 1 else np.ascontiguousarray(out.transpose(1, 2, 0))
