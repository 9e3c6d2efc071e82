"""KKT reconstruction: it really uses the weights, handles multi-class, refuses bad input."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from trainleak.attacks import get_attack
from trainleak.attacks.checkpoint.kkt import KKTReconstruction
from trainleak.data import balanced_binary, load_digits, to_symmetric
from trainleak.errors import ConfigError
from trainleak.metrics import evaluate_reconstruction
from trainleak.models import build_model, model_spec
from trainleak.releases import Checkpoint, Knowledge
from trainleak.training import TrainConfig, train_checkpoint


@pytest.fixture(scope="module")
def digits_release() -> tuple[torch.Tensor, Checkpoint, Knowledge]:
    """100 odd/even digits, a 64-400-1 homogeneous MLP trained by GD to the margin regime."""
    ds = balanced_binary(load_digits(), "odd_even", 50, seed=0)
    x = to_symmetric(ds.x)
    spec = model_spec("homogeneous_mlp", input_shape=(1, 8, 8), hidden=[400], init_scale=0.003)
    ckpt, hist = train_checkpoint(spec, x, ds.y, TrainConfig(lr=0.5, steps=8000, log_every=1000))
    assert hist.min_margin[-1] > 1.0
    return x, ckpt, Knowledge(input_shape=(1, 8, 8), value_range=(-1.0, 1.0))


def test_trained_release_beats_untrained_control(digits_release) -> None:  # type: ignore[no-untyped-def]
    """The reconstructions come from the trained weights, not from the attack's prior."""
    x, ckpt, knowledge = digits_release
    attack = KKTReconstruction(n_candidates=200, steps=1000, optimizer="adam", lr_x=0.01)
    rec = attack(ckpt, knowledge, seed=0)
    assert rec.diagnostics["kkt_loss_final"] < 0.05 * rec.diagnostics["kkt_loss_initial"]
    assert ckpt.initial is not None
    ctrl = attack(replace(ckpt, final=ckpt.initial), knowledge, seed=0)
    s_rec = evaluate_reconstruction(x, rec.inputs, match="best_ssim")
    s_ctrl = evaluate_reconstruction(x, ctrl.inputs, match="best_ssim")
    assert s_rec.median_ssim > s_ctrl.median_ssim + 0.05
    assert s_rec.counts[0.4] > s_ctrl.counts[0.4] + 10
    assert ctrl.diagnostics["kkt_loss_final"] > 20 * rec.diagnostics["kkt_loss_final"]


def test_multiclass_form_runs_and_fits() -> None:
    ds = load_digits().subset(list(range(30)))
    x = to_symmetric(ds.x)
    spec = model_spec("homogeneous_mlp", input_shape=(1, 8, 8), hidden=[200], out_dim=10)
    ckpt, _ = train_checkpoint(
        spec, x, ds.y, TrainConfig(lr=0.5, steps=1500, loss="cross_entropy", log_every=500)
    )
    rec = get_attack("kkt", n_candidates=40, steps=300, optimizer="adam")(
        ckpt, Knowledge(input_shape=(1, 8, 8), value_range=(-1.0, 1.0)), seed=1
    )
    assert rec.labels is not None and set(rec.labels.tolist()) == set(range(10))
    assert rec.diagnostics["kkt_loss_final"] < 0.5 * rec.diagnostics["kkt_loss_initial"]
    assert float(rec.inputs.abs().max()) <= 1.0


def test_non_homogeneous_architecture_is_refused() -> None:
    spec = model_spec("mlp", input_shape=(4,), hidden=[3], out_dim=1)
    state = build_model(spec, seed=0).state_dict()
    ckpt = Checkpoint(architecture=spec, final=dict(state))
    with pytest.raises(ConfigError, match="homogeneous"):
        KKTReconstruction(steps=1)(ckpt, Knowledge(input_shape=(4,), value_range=(-1.0, 1.0)))
