"""Image grids whose rows say what they show: "original" above "reconstruction", with captions.

Tiles are scaled up by a whole factor (nearest neighbour, so pixels stay pixels) until they are
at least :data:`MIN_TILE` pixels on a side, which leaves room for legible text beside them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from torch import Tensor

from trainleak.errors import ShapeError

MIN_TILE = 56
_GAP = 6
_FONT_SIZE = 12


def labelled_pairs(
    bands: Tensor,
    row_labels: Sequence[str],
    captions: Sequence[str] | None = None,
    *,
    cols: int = 8,
) -> np.ndarray:
    """Tile ``k`` cells of ``r`` stacked images, each grid row labelled on the left.

    Args:
        bands: ``(k, r, C, H, W)`` images in ``[0, 1]`` (``C`` is 1 or 3); cell ``i`` shows
            ``bands[i, 0]`` above ``bands[i, 1]`` above ...
        row_labels: ``r`` labels, e.g. ``("original", "reconstruction")``.
        captions: one short caption per cell (e.g. its SSIM), or ``None``.
        cols: cells per grid row.

    Returns:
        ``(height, width, 3)`` ``uint8`` image.

    Raises:
        ShapeError: when the shapes, labels or captions do not agree.
    """
    if bands.ndim != 5 or bands.shape[2] not in (1, 3) or len(row_labels) != bands.shape[1]:
        raise ShapeError(
            f"expected (k, r, C, H, W) with C in (1, 3) and r = {len(row_labels)} labels, "
            f"received {tuple(bands.shape)}"
        )
    k, r, _, h, w = bands.shape
    if captions is not None and len(captions) != k:
        raise ShapeError(f"{len(captions)} captions for {k} cells")
    cols = max(1, min(cols, k))
    scale = max(1, math.ceil(MIN_TILE / max(h, w, 1)))
    th, tw = h * scale, w * scale
    font = ImageFont.load_default(size=_FONT_SIZE)
    label_w = max(int(font.getlength(t)) for t in row_labels) + 2 * _GAP
    cap_h = _FONT_SIZE + 4 if captions is not None else 0
    cell_w, cell_h = tw + _GAP, r * th + (r - 1) * 2 + cap_h + 2 * _GAP
    rows = -(-k // cols)
    canvas = Image.new("RGB", (label_w + cols * cell_w + _GAP, rows * cell_h + _GAP), "white")
    draw = ImageDraw.Draw(canvas)
    for g in range(rows):
        for j, text in enumerate(row_labels):
            y = _GAP + g * cell_h + j * (th + 2) + th // 2 - _FONT_SIZE // 2
            draw.text((_GAP, y), text, fill=(40, 40, 40), font=font)
    for i in range(k):
        x0, y0 = label_w + (i % cols) * cell_w, _GAP + (i // cols) * cell_h
        for j in range(r):
            canvas.paste(_tile_image(bands[i, j], scale), (x0, y0 + j * (th + 2)))
        if captions is not None:
            text = captions[i]
            tx = x0 + max(0, (tw - int(font.getlength(text))) // 2)
            draw.text((tx, y0 + r * th + (r - 1) * 2 + 2), text, fill=(90, 90, 90), font=font)
    return np.asarray(canvas, dtype=np.uint8)


def _tile_image(x: Tensor, scale: int) -> Image.Image:
    arr = np.round(x.detach().double().clamp(0.0, 1.0).numpy() * 255).astype(np.uint8)
    arr = np.repeat(arr, 3, axis=0) if arr.shape[0] == 1 else arr
    img = Image.fromarray(np.ascontiguousarray(arr.transpose(1, 2, 0)), "RGB")
    return img.resize((img.width * scale, img.height * scale), Image.Resampling.NEAREST)


def labelled_candidates(
    images: Tensor, label: str, captions: Sequence[str] | None = None, *, cols: int = 8
) -> np.ndarray:
    """One labelled row band per grid row: reconstructions shown without originals.

    Args:
        images: ``(k, C, H, W)`` in ``[0, 1]``.
        label: e.g. ``"reconstruction (no ground truth)"``.
        captions: one per image, or ``None``.
        cols: images per grid row.
    """
    return labelled_pairs(images.unsqueeze(1), (label,), captions, cols=cols)


def to_unit_range(x: Tensor, value_range: tuple[float, float] | None) -> Tensor:
    """Map ``x`` from ``value_range`` to ``[0, 1]`` (min-max per image when it is unknown)."""
    if value_range is None:
        flat = x.double().flatten(1)
        lo, hi = flat.min(1).values, flat.max(1).values
        shape = (-1,) + (1,) * (x.ndim - 1)
        return ((x.double() - lo.view(shape)) / (hi - lo).clamp_min(1e-12).view(shape)).clamp(0, 1)
    lo_v, hi_v = value_range
    return ((x.double() - lo_v) / (hi_v - lo_v)).clamp(0.0, 1.0)


__all__ = ["MIN_TILE", "labelled_candidates", "labelled_pairs", "to_unit_range"]
