"""DP-SGD through Opacus, recording the parameter trajectory an informed adversary sees.

Poisson sampling at rate q (drawn here from a local ``torch.Generator``, so the batch
membership of every record is known and can be released to the informed adversary),
per-sample gradients and clipping to norm C by Opacus's ``GradSampleModule`` and
``DPOptimizer``, Gaussian noise N(0, sigma^2 C^2 I) on the clipped sum, division by the expected
batch size, and a plain SGD step. Training runs in float64 so that the adversary can recover
each noisy sum from consecutive parameters to ~1e-12.

Opacus is imported lazily; without it, :func:`train_dpsgd` raises an ``ImportError`` naming
``pip install 'trainleak[dp]'``.

References:
    Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016.
    Yousefpour et al., *Opacus: User-Friendly Differential Privacy Library in PyTorch*,
    arXiv 2109.12298, 2021.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from trainleak.bounds.dpsgd import Schedule, dpsgd_epsilon
from trainleak.errors import ShapeError, import_extra
from trainleak.models.registry import build_model
from trainleak.models.spec import ModelSpec
from trainleak.progress import Progress, report_every
from trainleak.releases.dp import DPTrajectory


class DPSGDConfig(BaseModel):
    """DP-SGD hyper-parameters (validated).

    Attributes:
        sampling_rate: Poisson sampling rate q in (0, 1].
        noise_multiplier: sigma > 0.
        max_grad_norm: clipping norm C > 0.
        lr: SGD learning rate.
        steps: number of noisy steps T.
        seed: seed of the initialisation, the sampling and the noise.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    sampling_rate: float = Field(0.05, gt=0, le=1)
    noise_multiplier: float = Field(1.0, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
    lr: float = Field(0.5, gt=0)
    steps: int = Field(200, ge=1)
    seed: int = 0

    def schedule(self) -> Schedule:
        """The (q, sigma, T) schedule of this config."""
        return Schedule.constant(self.sampling_rate, self.noise_multiplier, self.steps)

    def epsilon(self, delta: float) -> float:
        """Epsilon at ``delta`` from Opacus's RDP accountant."""
        return dpsgd_epsilon(self.schedule(), delta)


def _opacus() -> tuple[Any, Any]:
    opacus = import_extra("opacus", "dp", "DP-SGD training")
    optimizers = import_extra("opacus.optimizers", "dp", "DP-SGD training")
    return opacus.GradSampleModule, optimizers.DPOptimizer


def flat_params(model: nn.Module) -> torch.Tensor:
    """All parameters of ``model`` as one float64 vector, in ``parameters()`` order."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()


def train_dpsgd(
    spec: ModelSpec,
    others: tuple[torch.Tensor, torch.Tensor],
    target: tuple[torch.Tensor, torch.Tensor],
    config: DPSGDConfig,
    *,
    progress: Progress | None = None,
) -> DPTrajectory:
    """Train ``spec`` with DP-SGD on D_- plus one target record and release the trajectory.

    Args:
        spec: the architecture (a classifier; cross-entropy loss).
        others: ``(x, y)`` of the n - 1 other records, ``x`` of shape ``(n - 1, *input)``.
        target: ``(x, y)`` of the target record, ``x`` of shape ``(*input)``, ``y`` a scalar.
        config: DP-SGD hyper-parameters.
        progress: optional progress callback.

    Returns:
        The :class:`DPTrajectory` (the target's own batch membership is not released).

    Raises:
        ShapeError: records of mismatched shapes.
        ImportError: Opacus is not installed.
    """
    gsm_cls, dpopt_cls = _opacus()
    x_o, y_o = others
    x_t, y_t = target
    if tuple(x_t.shape) != tuple(x_o.shape[1:]) or y_o.shape[0] != x_o.shape[0]:
        raise ShapeError(
            f"target x {tuple(x_t.shape)} must match others' records {tuple(x_o.shape[1:])}"
        )
    x = torch.cat([x_o, x_t.unsqueeze(0)]).double()
    y = torch.cat([y_o, y_t.reshape(1)]).long()
    n = x.shape[0]
    gen = torch.Generator().manual_seed(config.seed)
    model = build_model(spec, seed=config.seed).double()
    gsm = gsm_cls(model, loss_reduction="sum")
    b = max(1, round(config.sampling_rate * n))
    opt = dpopt_cls(
        torch.optim.SGD(gsm.parameters(), lr=config.lr),
        noise_multiplier=config.noise_multiplier,
        max_grad_norm=config.max_grad_norm,
        expected_batch_size=b,
        loss_reduction="mean",
        generator=gen,
    )
    trajectory = [flat_params(model)]
    masks = torch.zeros(config.steps, n, dtype=torch.bool)
    for t in range(config.steps):
        masks[t] = torch.rand(n, generator=gen, dtype=torch.float64) < config.sampling_rate
        opt.zero_grad(set_to_none=True)
        with warnings.catch_warnings():  # Opacus's hooks warn when inputs need no gradient
            warnings.filterwarnings("ignore", message="Full backward hook", category=UserWarning)
            out = gsm(x[masks[t]])
            nn.functional.cross_entropy(out, y[masks[t]], reduction="sum").backward()
        opt.step()
        trajectory.append(flat_params(model))
        report_every(progress, "dp-sgd", t + 1, config.steps)
    return DPTrajectory(
        architecture=spec,
        params=torch.stack(trajectory),
        sampling_rate=config.sampling_rate,
        noise_multiplier=config.noise_multiplier,
        max_grad_norm=config.max_grad_norm,
        lr=config.lr,
        expected_batch_size=b,
        others_sampled=masks[:, :-1].clone(),
    )
