"""Seed 12 claims as pure functions of rows: each one on synthetic rows where it must hold and
where it must fail; the mean-image baseline uses no training image."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import torch

from trainleak.data import balanced_subset, load_digits, to_symmetric
from trainleak.experiments import get_experiment
from trainleak.experiments.subspace_claims import (
    ImageRow,
    WidthRow,
    claim_adam_breaks_span,
    claim_beats_full_space,
    claim_beats_trivial_baseline,
    claim_full_space_transition,
    claim_functions,
    claim_subspace_lowers_threshold,
)
from trainleak.experiments.subspace_reconstruction import SubspaceConfig, held_out_mean

CFG = SimpleNamespace(rf_dim=20, rf_n=10, rf_subspace_dim=3, rf_tol=0.1)
WIDTHS = (25, 100, 200, 400, 800, 1600)


def _rf(full: list[float], full_sub: list[float], sub: list[float]) -> list[WidthRow]:
    return [
        WidthRow(p, p / 200, p / 30, (a, b, c), (0.0, 0.0, 0.0))
        for p, a, b, c in zip(WIDTHS, full, full_sub, sub)
    ]


def _img(method: str, ssim: list[float], width: int = 256, **kw: object) -> ImageRow:
    s = tuple(ssim)
    med = float(torch.tensor(s).median())
    base = dict(part="widths", dataset="digits", width=width, optimizer="gd", method=method,
                train_loss=0.0, ssim=s, median_ssim=med, mean_ssim=sum(s) / len(s),
                median_psnr=10.0, ssim_at_least_04=0, ssim_at_least_06=0)  # fmt: skip
    base.update(kw)
    return ImageRow(**base)  # type: ignore[arg-type]


HIGH = [0.80, 0.85, 0.90, 0.75, 0.88, 0.92, 0.81, 0.79, 0.86, 0.90]
LOW = [v - 0.3 for v in HIGH]
NOISY = [v + (0.05 if i % 2 else -0.05) for i, v in enumerate(HIGH)]  # same mean, no gain


def test_full_space_transition_both_sides() -> None:
    ok = _rf([1.0, 1.0, 0.05, 0.04, 0.03, 0.02], [1.0] * 6, [1.0] * 6)
    assert claim_full_space_transition(ok, CFG).holds
    assert claim_full_space_transition(ok, CFG).evidence["transition_width"] == 200
    never = _rf([1.0] * 6, [1.0] * 6, [1.0] * 6)
    too_late = _rf([1.0, 1.0, 1.0, 1.0, 1.0, 0.05], [1.0] * 6, [1.0] * 6)  # 8 d n = 1600 is in
    too_early = _rf([0.05] * 6, [1.0] * 6, [1.0] * 6)  # 25 < d n
    assert not claim_full_space_transition(never, CFG).holds
    assert claim_full_space_transition(too_late, CFG).holds
    assert not claim_full_space_transition(too_early, CFG).holds


def test_subspace_lowers_threshold_both_sides() -> None:
    lower = _rf([1.0] * 6, [1.0, 1.0, 1.0, 0.05, 0.05, 0.05], [1.0, 0.05, 0.05, 0.05, 0.05, 0.05])
    assert claim_subspace_lowers_threshold(lower, CFG).holds
    only_sub = _rf([1.0] * 6, [1.0] * 6, [1.0] * 5 + [0.05])  # full space never recovers
    assert claim_subspace_lowers_threshold(only_sub, CFG).holds
    same = _rf([1.0] * 6, [1.0, 0.05, 0.05, 0.05, 0.05, 0.05], [1.0, 0.05, 0.05, 0.05, 0.05, 0.05])
    neither = _rf([1.0] * 6, [1.0] * 6, [1.0] * 6)
    assert not claim_subspace_lowers_threshold(same, CFG).holds
    assert not claim_subspace_lowers_threshold(neither, CFG).holds


def test_beats_full_space_needs_a_paired_gain_at_every_width() -> None:
    rows = [_img("subspace-aware", HIGH, w) for w in (16, 256)]
    rows += [_img("full space", LOW, w) for w in (16, 256)]
    assert claim_beats_full_space(rows, CFG, dataset="digits").holds
    # a higher median at one width is not enough when the per-image gain is noise
    rows[2] = _img("full space", NOISY, 16)
    res = claim_beats_full_space(rows, CFG, dataset="digits")
    assert not res.holds and res.evidence["ssim_gain_lower_bound"][0] < 0


def test_beats_trivial_baseline_against_the_closest_baseline() -> None:
    rows = [_img("subspace-aware", HIGH), _img("full space", LOW),
            _img("random uniform", [0.0] * 10), _img("held-out mean image", LOW)]  # fmt: skip
    res = claim_beats_trivial_baseline(rows, CFG, dataset="digits")
    assert res.holds and res.evidence["closest_baseline"] == "held-out mean image"
    rows[3] = _img("held-out mean image", NOISY)
    assert not claim_beats_trivial_baseline(rows, CFG, dataset="digits").holds


def test_adam_control_both_sides() -> None:
    gd = _img("subspace-aware", HIGH, part="control", span_energy=1.0)
    adam = _img("subspace-aware", LOW, part="control", optimizer="adam", span_energy=0.8)
    assert claim_adam_breaks_span([gd, adam], CFG).holds
    in_span = dataclasses.replace(adam, span_energy=1.0 - 1e-6)
    assert not claim_adam_breaks_span([gd, in_span], CFG).holds
    same_ssim = dataclasses.replace(adam, ssim=tuple(NOISY))
    assert not claim_adam_breaks_span([gd, same_ssim], CFG).holds


def test_claim_functions_follow_the_config() -> None:
    cfg = SubspaceConfig(datasets=["digits", "mnist"], adam_control=False)
    fns = claim_functions(cfg)
    assert len(fns) == 2 + 2 * 2
    assert len(claim_functions(SubspaceConfig(datasets=["digits"]))) == 2 + 2 + 1
    get_experiment("subspace-reconstruction")  # registered


def test_held_out_mean_uses_no_training_image() -> None:
    cfg = SubspaceConfig(datasets=["digits"])
    full = load_digits()
    train = to_symmetric(balanced_subset(full, 1, seed=cfg.seed).x)
    mean = held_out_mean(cfg, "digits")
    # the mean over all 1797 images minus the 10 training ones, recomputed independently
    total = to_symmetric(full.x).double().sum(0, keepdim=True)
    expected = (total - train.double().sum(0, keepdim=True)) / (len(full) - len(train))
    torch.testing.assert_close(mean.double(), expected, rtol=0, atol=1e-6)
    assert float((mean - train.mean(0, keepdim=True)).abs().max()) > 0.05
