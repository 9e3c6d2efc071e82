"""KKT reconstruction: it really uses the weights, handles multi-class, refuses bad input."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from trainleak.attacks import get_attack
from trainleak.attacks.checkpoint._network import ReleasedMLP
from trainleak.attacks.checkpoint.kkt import ADAM_FIT, KKTProblem, KKTReconstruction
from trainleak.data import balanced_binary, load_digits, to_symmetric
from trainleak.errors import ConfigError
from trainleak.metrics import evaluate_reconstruction
from trainleak.models import build_model, model_spec
from trainleak.releases import Checkpoint, Knowledge
from trainleak.systems.training import TrainConfig, train_checkpoint


@pytest.fixture(scope="module")
def digits_release() -> tuple[torch.Tensor, torch.Tensor, Checkpoint, Knowledge]:
    """100 odd/even digits minus their mean, a 64-400-1 homogeneous MLP trained by GD."""
    ds = balanced_binary(load_digits(), "odd_even", 50, seed=0)
    x = to_symmetric(ds.x)
    mean = x.mean(0, keepdim=True)
    spec = model_spec("homogeneous_mlp", input_shape=(1, 8, 8), hidden=[400], init_scale=0.003)
    ckpt, hist = train_checkpoint(
        spec, x - mean, ds.y, TrainConfig(lr=0.5, steps=6000, log_every=1000)
    )
    assert hist.min_margin[-1] > 1.0
    return x - mean, mean, ckpt, Knowledge(input_shape=(1, 8, 8), value_range=(-2.0, 2.0))


def test_trained_release_beats_untrained_control_and_mean_image(digits_release) -> None:  # type: ignore[no-untyped-def]
    """The reconstructions come from the trained weights, not from the attack's prior."""
    x, mean, ckpt, knowledge = digits_release
    # gate 150: with the default gate 19.2 the control reaches SSIM >= 0.4 on 66 of these 8x8
    # digits (15 with gate 150); the default's control is pinned at SSIM >= 0.6 below
    attack = KKTReconstruction(**ADAM_FIT, n_candidates=200, steps=1000, relu_alpha=150.0)
    rec = attack(ckpt, knowledge, seed=0)
    assert rec.diagnostics["kkt_loss_final"] < 0.01 * rec.diagnostics["kkt_loss_initial"]
    assert ckpt.initial is not None
    ctrl = attack(replace(ckpt, final=ckpt.initial), knowledge, seed=0)
    s_rec = evaluate_reconstruction(x, rec.inputs, offset=mean)
    s_ctrl = evaluate_reconstruction(x, ctrl.inputs, offset=mean)
    s_mean = evaluate_reconstruction(x, torch.zeros(1, 1, 8, 8), offset=mean)
    assert s_rec.median_ssim > s_ctrl.median_ssim + 0.1
    assert s_rec.counts[0.4] > s_ctrl.counts[0.4] + 50
    assert s_rec.counts[0.6] > s_mean.counts[0.6] + 5
    assert ctrl.diagnostics["kkt_loss_final"] > 100 * rec.diagnostics["kkt_loss_final"]


def test_multiclass_form_fits() -> None:
    """Buzaglo et al.'s multi-class condition: one multiplier per (sample, wrong class)."""
    ds = load_digits().subset(list(range(30)))
    x = to_symmetric(ds.x)
    x = x - x.mean(0, keepdim=True)
    spec = model_spec(
        "homogeneous_mlp", input_shape=(1, 8, 8), hidden=[200], out_dim=10, init_scale=0.01
    )
    ckpt, _ = train_checkpoint(
        spec, x, ds.y, TrainConfig(lr=0.5, steps=1500, loss="cross_entropy", log_every=500)
    )
    rec = get_attack("kkt", **ADAM_FIT, n_candidates=40, steps=300)(
        ckpt, Knowledge(input_shape=(1, 8, 8), value_range=(-2.0, 2.0)), seed=1
    )
    assert rec.labels is not None and set(rec.labels.tolist()) == set(range(10))
    assert rec.diagnostics["kkt_loss_final"] < 0.05 * rec.diagnostics["kkt_loss_initial"]
    assert float(rec.inputs.abs().max()) <= 2.0


def test_non_homogeneous_architecture_is_refused() -> None:
    spec = model_spec("mlp", input_shape=(4,), hidden=[3], out_dim=1)
    state = build_model(spec, seed=0).state_dict()
    ckpt = Checkpoint(architecture=spec, final=dict(state))
    with pytest.raises(ConfigError, match="homogeneous"):
        KKTReconstruction(steps=1)(ckpt, Knowledge(input_shape=(4,), value_range=(-1.0, 1.0)))


def test_adam_preset_pins_the_issue_11_strength(digits_release) -> None:  # type: ignore[no-untyped-def]
    """ADAM_FIT with gate 19.2 (the issue-11 default, still the experiments' and assessments'
    setting) at 600 steps, seed 0: measured 35 images at SSIM >= 0.6 of 100 (seed 1: 38); the
    former gate 150 gave 25 (seed 1: 27). The bar sits between them. The untrained control
    under the same settings, at the same 600 steps: 6 at SSIM >= 0.6."""
    x, mean, ckpt, knowledge = digits_release
    attack = KKTReconstruction(**ADAM_FIT, n_candidates=200, steps=600)
    scores = evaluate_reconstruction(x, attack(ckpt, knowledge, seed=0).inputs, offset=mean)
    assert scores.counts[0.6] >= 30
    assert ckpt.initial is not None
    ctrl = attack(replace(ckpt, final=ckpt.initial), knowledge, seed=0)
    assert evaluate_reconstruction(x, ctrl.inputs, offset=mean).counts[0.6] <= 12


def test_default_settings_beat_the_reference_settings(digits_release) -> None:  # type: ignore[no-untyped-def]
    """The default (SGD, mean multiplier scale, relative residual) at 400 steps, seed 0:
    measured 29 images at SSIM >= 0.6 of 100 (seed 1: 30); at the same steps the reference's
    published settings give 16 (seed 1: 11), the pre-issue-11 attack (ADAM_FIT, gate 150) 22
    (seed 1: 24), and the untrained control under the default 10 (seed 1: 10). The bar (26)
    sits above all three. Trade-off, measured and not hidden: on this small, briefly trained
    network the default degrades after about 500 steps (600 steps: 20, seed 1: 15), below
    ADAM_FIT with gate 19.2 (35); see benchmarks/results/kkt_reference.md."""
    x, mean, ckpt, knowledge = digits_release
    default = KKTReconstruction(n_candidates=200, steps=400)
    count = evaluate_reconstruction(x, default(ckpt, knowledge, seed=0).inputs, offset=mean)
    assert count.counts[0.6] >= 26
    reference = replace(
        default,
        lr_x=0.282,
        lr_lambda=1e-4,
        residual="absolute",
        bound_weight=1.0,
        lambda_weight=5.0,
    )
    ref = evaluate_reconstruction(x, reference(ckpt, knowledge, seed=0).inputs, offset=mean)
    assert count.counts[0.6] >= ref.counts[0.6] + 8
    assert ckpt.initial is not None
    ctrl = default(replace(ckpt, final=ckpt.initial), knowledge, seed=0)
    assert evaluate_reconstruction(x, ctrl.inputs, offset=mean).counts[0.6] <= 14


def test_reference_parametrisation_options(digits_release) -> None:  # type: ignore[no-untyped-def]
    """multiplier_scale='mean' averages over candidates; residual='absolute' weighs the
    residual by ||theta||^2 (Haim et al.'s parametrisation)."""
    _, _, ckpt, _ = digits_release
    net = ReleasedMLP.from_checkpoint(ckpt)
    hp = KKTReconstruction(n_candidates=10, steps=0, multiplier_scale="mean", residual="absolute")
    problem = KKTProblem(net, hp, "l2", None, torch.Generator().manual_seed(0))
    norm_sq = sum(float((w**2).sum()) for w in ckpt.final.values())
    assert problem.lambda_scale == pytest.approx(0.1)
    assert problem.kkt_weight == pytest.approx(norm_sq, rel=1e-5)
    fitted = KKTProblem(
        net, KKTReconstruction(**ADAM_FIT, n_candidates=10, steps=0), "l2", None, torch.Generator()
    )
    assert fitted.kkt_weight == 1.0 and fitted.lambda_scale != pytest.approx(0.1)
    for field in ("multiplier_scale", "residual"):
        with pytest.raises(ConfigError, match=field):
            KKTReconstruction(**{field: "bogus"})  # type: ignore[arg-type]


def test_cosine_schedule_anneals_the_last_steps(digits_release) -> None:  # type: ignore[no-untyped-def]
    """With lr_schedule='cosine' the step size decays to zero (the last of 40 updates runs at
    about 0.15% of the rate): the loss changes far less over the last step than under the
    constant schedule (same seed, same start)."""
    _, _, ckpt, knowledge = digits_release

    def last_change(schedule: str) -> float:
        attack = KKTReconstruction(n_candidates=16, steps=40, log_every=1, lr_schedule=schedule)  # type: ignore[arg-type]
        trace = attack(ckpt, knowledge, seed=0).trace
        return abs(trace[-1]["loss"] - trace[-2]["loss"])

    assert last_change("cosine") < 0.1 * last_change("constant")
    with pytest.raises(ConfigError, match="lr_schedule"):
        KKTReconstruction(lr_schedule="bogus")  # type: ignore[arg-type]
