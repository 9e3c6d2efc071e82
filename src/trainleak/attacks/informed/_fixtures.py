"""Tiny releases for the conformance suite and fast tests (digits, logistic regression)."""

from __future__ import annotations

import torch

from trainleak.data import load_digits
from trainleak.models.registry import model_spec
from trainleak.releases.base import Knowledge
from trainleak.releases.dp import DPTrajectory, PrivateRegression


def tiny_trajectory(
    noise_multiplier: float = 1.0, steps: int = 10, target: int = 3, seed: int = 0
) -> tuple[DPTrajectory, Knowledge]:
    """A 10-step DP-SGD run of a 64-10 logistic regression on 30 digits plus a target.

    The prior is a pool of 20 held-out digits containing the target (index ``target``).
    """
    from trainleak.systems.training.dp import DPSGDConfig, train_dpsgd

    ds = load_digits()
    others = (ds.x[:30], ds.y[:30])
    pool_x, pool_y = ds.x[100:120], ds.y[100:120]
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[], out_dim=10)
    cfg = DPSGDConfig(
        sampling_rate=0.2, noise_multiplier=noise_multiplier, steps=steps, lr=0.5, seed=seed
    )
    release = train_dpsgd(spec, others, (pool_x[target], pool_y[target]), cfg)
    knowledge = Knowledge(
        input_shape=(1, 8, 8),
        value_range=(0.0, 1.0),
        prior=pool_x,
        labels=pool_y,
        other_records=others,
    )
    return release, knowledge


def tiny_regression(
    rho: float = 1e4, d: int = 8, seed: int = 0
) -> tuple[PrivateRegression, Knowledge]:
    """Private ridge regression on 2d unit-sphere records; the target is the last record."""
    from trainleak.systems.mechanisms.regression import ridge_output_perturbation, sphere_records

    g = torch.Generator().manual_seed(seed)
    x, y = sphere_records(2 * d, d, g)
    release = ridge_output_perturbation(x, y, lam=float(2 * d), rho=rho, generator=g)
    knowledge = Knowledge(
        input_shape=(d,),
        labels=y[-1:],
        other_records=(x[:-1], y[:-1]),
        hyperparameters={"norm": 1.0},
    )
    return release, knowledge
