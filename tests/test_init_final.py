"""Seed 12: parameter-change matching from initial plus final weights (random features, MLPs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from release_fixtures import tiny_two_layer_checkpoint
from trainleak.attacks.checkpoint.init_final import (
    ParameterChangeMatching,
    SubspaceParameterMatching,
)
from trainleak.attacks.checkpoint.two_layer import TwoLayerChange
from trainleak.bounds.random_features import empirical_transition, projection_loss, width_threshold
from trainleak.errors import ConfigError, ShapeError
from trainleak.experiments.subspace_reconstruction import matched_l2_error
from trainleak.models.registry import build_model, model_spec
from trainleak.releases import Checkpoint, Knowledge
from trainleak.systems.training.random_features import random_features_checkpoint


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Small tensors: one thread is fastest, and on a shared machine two threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _sphere_data(n: int, d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    x = (x / x.norm(dim=1, keepdim=True) * d**0.5).float()
    return x, torch.randn(n, generator=g)


def test_projection_loss_vanishes_at_the_training_set_to_float64_precision() -> None:
    x, y = _sphere_data(5, 6)
    ckpt = random_features_checkpoint(x, y, width=300)
    net = TwoLayerChange.from_checkpoint(ckpt)
    at_truth = projection_loss(*net.gram_and_inner(x.double(), params="last", at="final"))
    other, _ = _sphere_data(5, 6, seed=1)
    elsewhere = projection_loss(*net.gram_and_inner(other.double(), params="last", at="final"))
    assert abs(float(at_truth)) < 1e-10
    assert float(elsewhere) > 0.1


def test_all_parameter_gram_matches_autograd_jacobians() -> None:
    ckpt, _ = tiny_two_layer_checkpoint()
    net = TwoLayerChange.from_checkpoint(ckpt)
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    gram, inner, delta_sq = net.gram_and_inner(x, params="all", at="init")
    model = build_model(ckpt.architecture, state=ckpt.initial).double()
    names = [k for k, _ in model.named_parameters()]
    rows = []
    for i in range(3):
        for c in range(2):
            model.zero_grad()
            model(x[i : i + 1])[0, c].backward()
            rows.append(
                torch.cat([dict(model.named_parameters())[k].grad.flatten() for k in names])
            )
    jac = torch.stack(rows)
    assert ckpt.initial is not None
    delta = torch.cat(
        [(ckpt.final[k].double() - ckpt.initial[k].double()).flatten() for k in names]
    )
    torch.testing.assert_close(gram, jac @ jac.T, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(inner[:, 0], jac @ delta, rtol=1e-10, atol=1e-10)
    assert float(delta_sq) == pytest.approx(float(delta @ delta), rel=1e-12)


def test_random_features_recovered_above_the_width_threshold_only() -> None:
    d, n = 6, 4
    x, y = _sphere_data(n, d)
    kn = Knowledge(input_shape=(d,), n_records=n)
    attack = ParameterChangeMatching(constraint="sphere", steps=600, lr=0.05, restarts=2)
    wide = attack(random_features_checkpoint(x, y, width=8 * d * n), kn, seed=0)
    narrow = attack(random_features_checkpoint(x, y, width=d * n // 4), kn, seed=0)
    e_wide, e_narrow = matched_l2_error(x, wide.inputs), matched_l2_error(x, narrow.inputs)
    assert e_wide < 0.05 and e_narrow > 3 * e_wide, (e_wide, e_narrow)
    assert wide.inputs.shape == (n, d)


def test_width_threshold_and_transition() -> None:
    assert width_threshold(20, 10) == 200.0
    assert width_threshold(20, 10, s=3, factor=2.0) == 60.0
    with pytest.raises(ConfigError, match="'s'"):
        width_threshold(20, 10, s=21)
    assert empirical_transition([1, 2, 3, 4], [0.5, 0.01, 0.6, 0.02], tol=0.1) == 4
    assert empirical_transition([1, 2], [0.5, 0.6], tol=0.1) is None
    with pytest.raises(ShapeError):
        empirical_transition([1, 2], [0.5], tol=0.1)


def test_unsupported_checkpoints_are_refused_with_what_is_supported() -> None:
    kn = Knowledge(input_shape=(1, 4, 4), n_records=4)
    deep = model_spec("mlp", input_shape=(1, 4, 4), hidden=[8, 8], out_dim=2)
    state = dict(build_model(deep, seed=0).state_dict())
    with pytest.raises(ConfigError, match="two-layer networks"):
        ParameterChangeMatching(steps=1)(Checkpoint(deep, state, state), kn)
    conv = model_spec("gaussian_mlp", n_hidden=3)
    with pytest.raises(ConfigError, match="random_features"):
        ParameterChangeMatching(steps=1)(Checkpoint(conv, {}, {}), kn)
    ckpt, _ = tiny_two_layer_checkpoint()
    no_init = Checkpoint(ckpt.architecture, ckpt.final, None)
    with pytest.raises(ConfigError, match="initial weights"):
        SubspaceParameterMatching(steps=1)(no_init, kn)
    with pytest.raises(ConfigError, match="input_shape"):
        ParameterChangeMatching(steps=1)(ckpt, Knowledge(input_shape=(3,), n_records=4))


def test_frozen_first_layer_needs_a_prior_subspace() -> None:
    x, y = _sphere_data(4, 6)
    ckpt = random_features_checkpoint(x, y, width=50)
    kn = Knowledge(input_shape=(6,), n_records=4)
    with pytest.raises(ConfigError, match="source='prior'"):
        SubspaceParameterMatching(steps=1)(ckpt, kn)
    with pytest.raises(ConfigError, match="Knowledge.prior"):
        SubspaceParameterMatching(steps=1, source="prior")(ckpt, kn)
