"""Seed 12: the subspace-aware attack beats full-space search at small widths."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from trainleak.attacks.checkpoint.init_final import (
    ParameterChangeMatching,
    SubspaceParameterMatching,
)
from trainleak.attacks.checkpoint.two_layer import TwoLayerChange
from trainleak.data import balanced_subset, load_digits, to_symmetric
from trainleak.experiments.subspace_reconstruction import matched_l2_error, span_energy
from trainleak.metrics import evaluate_reconstruction
from trainleak.models import model_spec
from trainleak.releases import Knowledge
from trainleak.systems.training import TrainConfig, train_checkpoint
from trainleak.systems.training.random_features import random_features_checkpoint


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Small tensors: one thread is fastest, and on a shared machine two threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_subspace_beats_full_space_on_digits_at_small_width() -> None:
    ds = balanced_subset(load_digits(), 1, seed=0)
    x = to_symmetric(ds.x)
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[64], out_dim=10)
    cfg = TrainConfig(lr=0.05, steps=300, loss="cross_entropy", log_every=100)
    ckpt, _ = train_checkpoint(spec, x, ds.y, cfg, init_seed=0)
    # the exact fact the attack rests on: GD keeps dW1 in span{x_i}
    assert span_energy(TwoLayerChange.from_checkpoint(ckpt), x) > 1 - 1e-9
    kn = Knowledge(input_shape=(1, 8, 8), n_records=10, value_range=(-1.0, 1.0))
    search = {"steps": 800, "lr": 0.05, "restarts": 1, "init_std": 0.5}
    sub = SubspaceParameterMatching(**search)(ckpt, kn, seed=0)  # type: ignore[arg-type]
    full = ParameterChangeMatching(**search)(ckpt, kn, seed=0)  # type: ignore[arg-type]
    s_sub = evaluate_reconstruction(x, sub.inputs, match="hungarian").median_ssim
    s_full = evaluate_reconstruction(x, full.inputs, match="hungarian").median_ssim
    assert sub.diagnostics["subspace_dim"] <= 10
    assert s_sub > s_full + 0.08, (s_sub, s_full)


def test_subspace_search_recovers_random_features_below_the_full_space_threshold() -> None:
    d, n, s = 12, 6, 2
    g = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(d, s, generator=g, dtype=torch.float64))[0]
    x = torch.randn(n, s, generator=g, dtype=torch.float64) @ basis.T
    x = (x / x.norm(dim=1, keepdim=True) * d**0.5).float()
    prior = (torch.randn(10, s, generator=g, dtype=torch.float64) @ basis.T).float()
    ckpt = random_features_checkpoint(x, torch.randn(n, generator=g), width=d * n // 2)
    kn = Knowledge(input_shape=(d,), n_records=n, prior=prior)
    common = {"steps": 600, "restarts": 3, "constraint": "sphere"}
    sub = SubspaceParameterMatching(source="prior", max_dim=s, lr=0.3, **common)(ckpt, kn)  # type: ignore[arg-type]
    full = ParameterChangeMatching(lr=0.05, **common)(ckpt, kn)  # type: ignore[arg-type]
    e_sub, e_full = matched_l2_error(x, sub.inputs), matched_l2_error(x, full.inputs)
    assert sub.diagnostics["subspace_dim"] == s
    assert e_sub < 0.25 and e_full > 4 * e_sub, (e_sub, e_full)
