"""Optimizer-aware KKT targets and the implicit-bias profile (seed 1)."""

from __future__ import annotations

import warnings

import pytest
import torch

from trainleak.attacks.checkpoint.kkt import KKTReconstruction
from trainleak.data import balanced_binary, load_digits, to_symmetric
from trainleak.models import model_spec
from trainleak.releases import Checkpoint
from trainleak.scenarios.implicit_bias import (
    implicit_bias_profile,
    kkt_identifiability,
    kkt_residual,
    linf_saturation,
)
from trainleak.systems.training import TrainConfig, train_checkpoint

SPEC = model_spec("homogeneous_mlp", input_shape=(1, 8, 8), hidden=[100], init_scale=0.003)


@pytest.fixture(scope="module")
def data() -> tuple[torch.Tensor, torch.Tensor]:
    ds = balanced_binary(load_digits(), "odd_even", 10, seed=0)
    return to_symmetric(ds.x), ds.y


@pytest.fixture(scope="module")
def muon_ckpt(data: tuple[torch.Tensor, torch.Tensor]) -> Checkpoint:
    x, y = data
    cfg = TrainConfig(optimizer="muon", lr=0.02, steps=1000, lr_schedule="inv_sqrt")
    return train_checkpoint(SPEC, x, y, cfg)[0]


@pytest.fixture(scope="module")
def gd_ckpt(data: tuple[torch.Tensor, torch.Tensor]) -> Checkpoint:
    x, y = data
    return train_checkpoint(SPEC, x, y, TrainConfig(lr=0.5, steps=3000))[0]


def test_spectral_target_fits_muon_where_l2_does_not(
    muon_ckpt: Checkpoint, data: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = data
    r_l2 = kkt_residual(muon_ckpt, x, y, "l2", steps=300)
    r_spec = kkt_residual(muon_ckpt, x, y, "spectral", steps=300)
    assert r_l2 > 0.5, f"l2 target unexpectedly fits a Muon checkpoint ({r_l2:.3f})"
    assert r_spec < 0.5 * r_l2


def test_l2_target_fits_gd_better_than_linf(
    gd_ckpt: Checkpoint, data: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = data
    r_l2 = kkt_residual(gd_ckpt, x, y, "l2", steps=300)
    r_linf = kkt_residual(gd_ckpt, x, y, "linf", steps=300)
    assert r_l2 < 0.2
    assert r_linf > 2 * r_l2


def test_auto_target_reads_metadata_and_mismatch_warns(muon_ckpt: Checkpoint) -> None:
    assert KKTReconstruction(target="auto").resolve_target(muon_ckpt) == "spectral"
    with pytest.warns(UserWarning, match="'l2'.*'muon'"):
        KKTReconstruction(target="l2").resolve_target(muon_ckpt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert KKTReconstruction(target="spectral_psd").resolve_target(muon_ckpt) == "spectral_psd"


def test_signum_saturates_linf_and_loses_equations(
    gd_ckpt: Checkpoint, data: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = data
    small = model_spec("homogeneous_mlp", input_shape=(1, 8, 8), hidden=[12], init_scale=0.003)
    sg, _ = train_checkpoint(small, x, y, TrainConfig(optimizer="signum", lr=1e-3, steps=600))
    gd, _ = train_checkpoint(small, x, y, TrainConfig(lr=0.5, steps=600))
    assert linf_saturation(sg) > 0.2 > 10 * linf_saturation(gd)
    eq_sg = kkt_identifiability(sg, x, y, "linf")
    eq_gd = kkt_identifiability(gd, x, y, "l2")
    assert eq_sg["unknowns"] == eq_gd["unknowns"] == 20 * 64 + 20
    assert eq_sg["rank"] < eq_gd["rank"]


def test_profile_reports_every_part(
    muon_ckpt: Checkpoint, data: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = data
    prof = implicit_bias_profile(muon_ckpt, x, y, residual_steps=50)
    assert prof["optimizer"] == "muon"
    assert 0 < prof["linf_saturation"] < 1
    assert len(prof["spectral_flatness"]) == 2
    assert set(prof["kkt_residuals"]) == {"l2", "spectral", "spectral_psd", "linf"}
