"""Labelled image grids: originals above reconstructions, rows named, pairs captioned."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainleak.errors import ShapeError
from trainleak.metrics import evaluate_reconstruction, reconstruction_grid
from trainleak.metrics.labelled_grid import MIN_TILE, labelled_candidates, labelled_pairs


def test_pairs_are_scaled_up_with_labels_in_the_margin() -> None:
    top = torch.zeros(3, 1, 8, 8)
    bottom = torch.ones(3, 1, 8, 8)
    grid = labelled_pairs(torch.stack([top, bottom], 1), ("original", "reconstruction"),
                          ["a", "b", "c"], cols=3)  # fmt: skip
    assert grid.dtype == np.uint8 and grid.ndim == 3 and grid.shape[2] == 3
    dark = (grid.sum(2) < 200).nonzero()
    margin = int(dark[1].min())  # the first dark column is label text, left of the tiles
    first_tile_col = int(np.argmax((grid[:, :, 0] == 0).sum(0) > MIN_TILE // 2))
    assert margin < first_tile_col
    # a black tile of at least MIN_TILE pixels, and a white one right under it (2 px apart)
    column = grid[:, first_tile_col + 2, 0]
    black_rows = np.nonzero(column == 0)[0]
    assert len(black_rows) >= MIN_TILE
    assert (column[black_rows.max() + 3 : black_rows.max() + 3 + MIN_TILE] == 255).all()
    unlabelled = labelled_pairs(torch.stack([top, bottom], 1), ("", ""), None, cols=3)
    assert unlabelled.shape[1] < grid.shape[1]  # the label margin is what the text needs


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ShapeError):
        labelled_pairs(torch.zeros(2, 2, 2, 4, 4), ("a", "b"))  # two channels
    with pytest.raises(ShapeError):
        labelled_pairs(torch.zeros(2, 2, 1, 4, 4), ("a",))  # one label for two rows
    with pytest.raises(ShapeError):
        labelled_pairs(torch.zeros(2, 2, 1, 4, 4), ("a", "b"), ["only one"])


def test_reconstruction_grid_is_labelled_by_default() -> None:
    x = torch.rand(4, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    scores = evaluate_reconstruction(x, x)
    labelled = reconstruction_grid(x, x, scores, n=4)
    bare = reconstruction_grid(x, x, scores, n=4, labels=False)
    assert labelled.ndim == 3 and bare.ndim == 2
    assert labelled.shape[0] > 2 * MIN_TILE and bare.shape[0] == 2 * 8 + 2
    rgb = labelled_candidates(torch.rand(5, 3, 4, 4), "reconstruction", None, cols=5)
    assert rgb.shape[2] == 3 and rgb.shape[1] > 5 * MIN_TILE
