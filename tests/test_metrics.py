"""Tests of trainleak.metrics: real effects with margins, oracles against torchmetrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from trainleak.errors import ConfigError, ShapeError
from trainleak.metrics import (
    as_image_batch,
    class_mean_candidates,
    compare_to_baselines,
    evaluate_reconstruction,
    match_hungarian,
    match_nearest,
    mean_image_candidates,
    minmax_normalize,
    ncc_matrix,
    psnr,
    random_candidates,
    reconstruction_grid,
    ssim,
    ssim_matrix,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def digits() -> tuple[torch.Tensor, torch.Tensor]:
    """100 sklearn digits (10 per class) in [-1, 1], shape (100, 1, 8, 8)."""
    data = load_digits()
    idx = np.concatenate([np.flatnonzero(data.target == c)[:10] for c in range(10)])
    x = torch.tensor(data.data[idx], dtype=torch.float32).reshape(-1, 1, 8, 8) / 8.0 - 1.0
    return x, torch.tensor(data.target[idx])


# --- image metrics -------------------------------------------------------------------------


def test_identical_images_have_ssim_one_and_infinite_psnr() -> None:
    x = torch.rand(5, 3, 20, 20, generator=_gen())
    assert torch.allclose(ssim(x, x), torch.ones(5), atol=1e-5)
    assert torch.isinf(psnr(x, x)).all()


def test_psnr_matches_closed_form() -> None:
    a = torch.zeros(2, 1, 4, 4)
    b = torch.full((2, 1, 4, 4), 0.1)
    assert torch.allclose(psnr(a, b), torch.full((2,), 20.0), atol=1e-4)  # mse 0.01 -> 20 dB
    assert torch.allclose(psnr(a, b, data_range=2.0), torch.full((2,), 20 + 20 * math.log10(2)))


def test_ssim_is_per_pair_and_orders_by_damage() -> None:
    x = torch.rand(3, 1, 28, 28, generator=_gen())
    noisy = x.clone()
    noisy[1] += 0.1 * torch.randn(1, 28, 28, generator=_gen(1))
    noisy[2] = torch.rand(1, 28, 28, generator=_gen(2))
    s = ssim(x, noisy.clamp(0, 1))
    assert s.shape == (3,)
    assert s[0] > 0.999 and 0.3 < s[1] < 0.99 and s[2] < 0.1


def test_ssim_works_on_tiny_images_by_upsampling() -> None:
    x = torch.rand(4, 1, 5, 7, generator=_gen())
    assert torch.allclose(ssim(x, x), torch.ones(4), atol=1e-5)
    assert (ssim(x, x.flip(0)) < 0.9).all()


def test_ssim_matrix_matches_pairwise_ssim() -> None:
    a = torch.rand(6, 1, 8, 8, generator=_gen(0))
    b = torch.rand(4, 1, 8, 8, generator=_gen(1))
    ref = ssim(a.repeat_interleave(4, 0), b.repeat(6, 1, 1, 1)).reshape(6, 4)
    assert torch.allclose(ssim_matrix(a, b), ref, atol=1e-5)
    c = torch.rand(3, 3, 17, 19, generator=_gen(2))
    ref3 = ssim(c.repeat_interleave(3, 0), c.repeat(3, 1, 1, 1)).reshape(3, 3)
    assert torch.allclose(ssim_matrix(c, c), ref3, atol=1e-5)


def test_minmax_normalize_per_sample_and_constant() -> None:
    x = torch.stack([torch.linspace(-3, 5, 16).reshape(1, 4, 4), torch.full((1, 4, 4), 7.0)])
    y = minmax_normalize(x)
    assert y[0].min() == 0 and y[0].max() == 1
    assert torch.equal(y[1], torch.full((1, 4, 4), 0.5))


def test_flat_square_inputs_are_read_as_images_and_bad_shapes_refused() -> None:
    assert as_image_batch(torch.zeros(3, 64)).shape == (3, 1, 8, 8)
    assert as_image_batch(torch.zeros(3, 12), image_shape=(3, 4)).shape == (3, 1, 3, 4)
    with pytest.raises(ShapeError, match="image_shape"):
        as_image_batch(torch.zeros(3, 10))
    with pytest.raises(ShapeError, match="equal shapes"):
        ssim(torch.zeros(2, 1, 8, 8), torch.zeros(3, 1, 8, 8))


# --- matching ------------------------------------------------------------------------------


def test_ncc_of_an_image_with_itself_is_one_and_invariant_to_affine_maps() -> None:
    x = torch.randn(5, 1, 8, 8, generator=_gen())
    m = ncc_matrix(x, x)
    assert torch.allclose(m.diagonal(), torch.ones(5, dtype=torch.float64))
    assert torch.allclose(ncc_matrix(x, 3 * x + 2), m)
    assert torch.allclose(ncc_matrix(x, -x).diagonal(), -torch.ones(5, dtype=torch.float64))
    assert (m.abs() <= 1 + 1e-12).all()
    assert ncc_matrix(x, torch.ones(1, 1, 8, 8)).abs().max() == 0  # constant image


def test_match_nearest_finds_shuffled_noisy_copies() -> None:
    x = torch.randn(20, 64, generator=_gen())
    perm = torch.randperm(20, generator=_gen(1))
    cands = x[perm] + 0.1 * torch.randn(20, 64, generator=_gen(2))
    inverse = torch.argsort(perm)
    assert torch.equal(match_nearest(x, cands), inverse)
    assert torch.equal(match_nearest(x, cands, by="l2"), inverse)


def test_hungarian_is_one_to_one_where_nearest_is_not() -> None:
    x = torch.randn(8, 1, 6, 6, generator=_gen())
    cands = torch.cat([x[:1].repeat(8, 1, 1, 1), x + 2 * torch.randn(x.shape, generator=_gen(1))])
    nearest, hung = match_nearest(x, cands), match_hungarian(x, cands)
    assert len(set(hung.tolist())) == 8
    assert len(set(nearest.tolist())) < 8  # the eight copies of x[0] attract several images
    ncc = ncc_matrix(x, cands)
    total = ncc[torch.arange(8), hung].sum()
    for _ in range(50):  # no random one-to-one assignment beats the Hungarian one
        other = torch.randperm(len(cands), generator=_gen(_))[:8]
        assert ncc[torch.arange(8), other].sum() <= total + 1e-9
    with pytest.raises(ShapeError, match="at least as many candidates"):
        match_hungarian(x, cands[:3])


def test_evaluate_perfect_reconstruction_counts_every_image(digits) -> None:
    x, _ = digits
    cands = x[torch.randperm(len(x), generator=_gen())]
    for match in ("ncc", "hungarian", "best_ssim"):
        s = evaluate_reconstruction(x, cands, match=match)
        assert s.counts == {0.4: 100, 0.6: 100}
        assert s.median_ssim > 0.999 and s.mean_top10_ssim > 0.999
        assert torch.equal(cands[s.matched], x)


def test_evaluate_is_invariant_to_candidate_scale_when_normalized(digits) -> None:
    x, _ = digits
    scaled = 1e-3 * x + 5.0
    assert evaluate_reconstruction(x, scaled).median_ssim > 0.999
    raw = evaluate_reconstruction(x, scaled, normalize=False, data_range=2.0)
    assert raw.median_ssim < 0.1


def test_offset_is_added_back_before_normalisation(digits) -> None:
    x, _ = digits
    mean = x.mean(dim=0)
    centred = x - mean
    # candidates = the centred images themselves: with the mean added back they are exact
    with_offset = evaluate_reconstruction(centred, centred, offset=mean)
    assert with_offset.median_ssim > 0.999
    # candidates that are only the mean image score the same as the mean-image baseline
    flat = mean.reshape(-1)  # offset may come flat
    only_mean = evaluate_reconstruction(centred, torch.zeros(5, 1, 8, 8), offset=flat)
    direct = evaluate_reconstruction(x, mean_image_candidates(x, 5))
    assert abs(only_mean.median_ssim - direct.median_ssim) < 1e-6


def test_best_ssim_is_at_least_the_ncc_match(digits) -> None:
    x, _ = digits
    cands = x[:50] + 0.5 * torch.randn(50, 1, 8, 8, generator=_gen())
    by_ncc = evaluate_reconstruction(x, cands)
    best = evaluate_reconstruction(x, cands, match="best_ssim")
    assert (best.ssim >= by_ncc.ssim - 1e-5).all()
    assert best.mean_top10_ssim >= by_ncc.mean_top10_ssim


def test_scores_summary_and_row() -> None:
    x = torch.rand(12, 1, 8, 8, generator=_gen())
    s = evaluate_reconstruction(x, x, thresholds=(0.5,))
    row = s.to_row("exact")
    assert row["method"] == "exact" and row["n"] == 12 and row["ssim>=0.5"] == 12
    summary = s.summary()
    assert set(summary) >= {"median_ssim", "mean_top10_ssim", "mean_ssim", "median_psnr"}
    assert all(isinstance(v, float) for v in summary.values())


def test_evaluate_refuses_bad_arguments() -> None:
    x = torch.rand(4, 1, 8, 8, generator=_gen())
    with pytest.raises(ConfigError, match="'match'"):
        evaluate_reconstruction(x, x, match="psnr")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'thresholds'"):
        evaluate_reconstruction(x, x, thresholds=(1.5,))
    with pytest.raises(ShapeError, match="image shape"):
        evaluate_reconstruction(x, torch.rand(4, 1, 7, 7))
    with pytest.raises(ShapeError, match="offset"):
        evaluate_reconstruction(x, x, offset=torch.zeros(5))
    with pytest.raises(ShapeError, match="candidate"):
        evaluate_reconstruction(x, x[:0])


# --- baselines -----------------------------------------------------------------------------


def test_baseline_candidates_shapes_and_values(digits) -> None:
    x, y = digits
    mean = mean_image_candidates(x, 7)
    assert mean.shape == (7, 1, 8, 8) and torch.allclose(mean[3], x.mean(0))
    cm = class_mean_candidates(x, y, 25)
    assert cm.shape == (25, 1, 8, 8)
    assert torch.allclose(cm[3], x[y == 3].mean(0)) and torch.allclose(cm[13], cm[3])
    r = random_candidates((1, 8, 8), 30, _gen(), (-1.0, 1.0))
    assert r.shape == (30, 1, 8, 8) and r.min() >= -1 and r.max() <= 1
    assert torch.equal(r, random_candidates((1, 8, 8), 30, _gen(), (-1.0, 1.0)))
    with pytest.raises(ConfigError, match="'m'"):
        mean_image_candidates(x, 0)


def test_mean_image_baseline_is_far_below_exact_reconstruction_on_digits(digits) -> None:
    x, y = digits
    g = _gen()
    baselines = {
        "mean image": mean_image_candidates(x, 200),
        "class means": class_mean_candidates(x, y, 200),
        "random": random_candidates((1, 8, 8), 200, g, (-1.0, 1.0)),
    }
    rows = compare_to_baselines(x, x.clone(), baselines, attack_name="exact")
    by = {r["method"]: r for r in rows}
    assert [r["method"] for r in rows] == ["exact", "mean image", "class means", "random"]
    assert by["exact"]["median_ssim"] > 0.999
    assert by["mean image"]["median_ssim"] < 0.7  # the floor is high, but far below exact
    assert by["random"]["median_ssim"] < by["mean image"]["median_ssim"] - 0.1
    # on digits, class means are the strongest trivial baseline: the exact reconstruction
    # still beats it at the 0.6 threshold, and the margin is reported against it
    assert by["exact"]["best_baseline"] == "class means"
    margin = by["exact"]["margin ssim>=0.6"]
    assert margin == 100 - by["class means"]["ssim>=0.6"] and margin >= 1
    assert by["random"]["margin ssim>=0.6"] is None
    assert len({frozenset(r) for r in rows}) == 1  # every row has the same keys


def test_noise_attack_gets_a_negative_margin(digits) -> None:
    x, _ = digits
    noise = random_candidates((1, 8, 8), 100, _gen(3), (-1.0, 1.0))
    rows = compare_to_baselines(x, noise, {"mean": mean_image_candidates(x, 100)})
    assert rows[0]["margin ssim>=0.4"] < 0


# --- grid ----------------------------------------------------------------------------------


def test_grid_puts_best_pair_first_with_train_above_reconstruction() -> None:
    x = torch.rand(6, 1, 4, 4, generator=_gen())
    cands = x.clone()
    cands[1:] = torch.rand(5, 1, 4, 4, generator=_gen(1))  # only image 0 is reconstructed
    scores = evaluate_reconstruction(x, cands)
    grid = reconstruction_grid(x, cands, scores, n=3, cols=3, pad=1, labels=False)
    assert grid.dtype == np.uint8 and grid.shape == (2 * 4 + 2, 3 * 5 + 1)
    top, bottom = grid[1:5, 1:5], grid[5:9, 1:5]
    expected = np.round(minmax_normalize(x[:1]).numpy()[0, 0] * 255).astype(np.uint8)
    assert np.array_equal(top, expected) and np.array_equal(bottom, expected)
    assert (grid[0] == 255).all() and (grid[:, 0] == 255).all()  # white padding


def test_grid_handles_three_channels_and_flat_digits(digits) -> None:
    rgb = torch.rand(5, 3, 6, 6, generator=_gen())
    g3 = reconstruction_grid(
        rgb, rgb, evaluate_reconstruction(rgb, rgb), n=10, cols=4, labels=False
    )
    assert g3.shape == (2 * (2 * 6 + 1) + 1, 4 * 7 + 1, 3)
    x, _ = digits
    flat = x.reshape(100, 64)
    g1 = reconstruction_grid(flat, flat, evaluate_reconstruction(flat, flat), n=8, labels=False)
    assert g1.ndim == 2 and g1.shape == (2 * 8 + 2, 8 * 9 + 1)


def test_vector_scores_are_sign_free_and_strict() -> None:
    import numpy as np

    from trainleak.metrics.vectors import abs_cosine, exact_rows, relative_error

    true = np.array([[1.0, 0.0], [0.0, 2.0]])
    rec = np.array([[-3.0, 0.0], [1.0, 1.0]])
    assert np.allclose(abs_cosine(rec, true), [1.0, 2**-0.5])
    assert exact_rows(rec, np.array([1, 0]), true, np.array([1, 0])).tolist() == [True, False]
    assert exact_rows(rec, np.array([0, 0]), true, np.array([1, 0])).tolist() == [False, False]
    assert relative_error(true, true) == 0.0
    assert relative_error(2 * true, true) == 1.0
