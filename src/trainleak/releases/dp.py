"""Releases of differentially private mechanisms: a DP-SGD trajectory, a private regression.

:class:`DPTrajectory` is what the strongest informed adversary of the DP-SGD reconstruction
bounds observes (Balle, Cherubin & Hayes, S&P 2022; Hayes, Mahloujifar & Balle, NeurIPS 2023):
every intermediate parameter vector theta_0 .. theta_T, the hyper-parameters, and which of the
*other* records each Poisson batch contained. Together with the other records themselves (in
:class:`~trainleak.releases.base.Knowledge`) this lets it subtract every known contribution and
face the target's clipped gradient plus Gaussian noise alone, which is the channel the
leakage bound of :mod:`trainleak.bounds.dpsgd` is proved for.

:class:`PrivateRegression` is the output of ridge regression with Gaussian output
perturbation (:mod:`trainleak.systems.mechanisms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainleak.errors import ShapeError
from trainleak.models.spec import ModelSpec
from trainleak.releases.base import Release


@dataclass(frozen=True)
class DPTrajectory(Release):
    """The parameter trajectory of a DP-SGD run (plain SGD steps on the privatised gradient).

    theta_{t+1} = theta_t - lr * (sum_{i in B_t} clip_C(g_i(theta_t)) + N(0, sigma^2 C^2 I)) / b,
    with B_t a Poisson sample at rate q and b the expected batch size (Opacus's convention).

    Attributes:
        architecture: the model's :class:`ModelSpec`.
        params: flattened parameters theta_0 .. theta_T, shape ``(T + 1, P)``, float64, in the
            order of ``model.parameters()``.
        sampling_rate: Poisson sampling rate q.
        noise_multiplier: sigma.
        max_grad_norm: clipping norm C.
        lr: SGD learning rate.
        expected_batch_size: b (the divisor of the noisy sum).
        others_sampled: ``(T, n - 1)`` bool, whether each *other* record was in batch t, in
            the order of ``Knowledge.other_records``.
        loss: ``cross_entropy`` (the only loss supported).
    """

    architecture: ModelSpec
    params: torch.Tensor
    sampling_rate: float
    noise_multiplier: float
    max_grad_norm: float
    lr: float
    expected_batch_size: int
    others_sampled: torch.Tensor
    loss: str = "cross_entropy"

    def __post_init__(self) -> None:
        if self.params.ndim != 2 or self.params.shape[0] < 2:
            raise ShapeError(f"params must be (T + 1, P) with T >= 1, got {self.params.shape}")
        if self.others_sampled.ndim != 2 or self.others_sampled.shape[0] != self.steps:
            raise ShapeError(
                f"others_sampled must be (T={self.steps}, n - 1), "
                f"got {tuple(self.others_sampled.shape)}"
            )

    @property
    def steps(self) -> int:
        """T, the number of noisy steps."""
        return int(self.params.shape[0]) - 1

    def noisy_sums(self) -> torch.Tensor:
        """The privatised gradient sums sum_{i in B_t} clip(g_i) + noise, shape ``(T, P)``."""
        return (self.params[:-1] - self.params[1:]) * (self.expected_batch_size / self.lr)

    def describe(self) -> str:
        return (
            f"DPTrajectory({self.architecture.kind}, T={self.steps}, q={self.sampling_rate}, "
            f"sigma={self.noise_multiplier}, C={self.max_grad_norm})"
        )


@dataclass(frozen=True)
class PrivateRegression(Release):
    """Ridge regression released with Gaussian output perturbation (rho-zCDP).

    Attributes:
        theta: the released coefficients theta_hat + N(0, sigma^2 I), shape ``(d,)``.
        lam: ridge parameter lambda of min_theta 1/2 sum (y_i - x_i^T theta)^2 + lam/2 ||theta||^2.
        rho: the zCDP parameter.
        sensitivity: replace-one l2 sensitivity Delta of theta_hat.
        sigma: noise standard deviation Delta / sqrt(2 rho).
        n_records: number of training records.
    """

    theta: torch.Tensor
    lam: float
    rho: float
    sensitivity: float
    sigma: float
    n_records: int

    def describe(self) -> str:
        return f"PrivateRegression(d={self.theta.numel()}, rho={self.rho:g}, lam={self.lam:g})"
