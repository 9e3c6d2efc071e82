"""Training configuration (validated), shared by every training loop."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

OptimizerName = Literal["gd", "sgd", "adam", "muon", "signum"]
LossName = Literal["logistic", "cross_entropy"]


class TrainConfig(BaseModel):
    """How to train.

    Attributes:
        optimizer: ``gd`` (full-batch gradient descent), ``sgd`` (mini-batch), ``adam``,
            ``muon`` (``torch.optim.Muon`` on every matrix; Adam for the other parameters)
            or ``signum`` (sign of momentum).
        lr: learning rate.
        steps: number of optimisation steps.
        batch_size: mini-batch size (``None`` = full batch).
        loss: ``logistic`` for one-output binary models (labels 0/1 mapped to -1/+1),
            ``cross_entropy`` for multi-class models.
        momentum: momentum of SGD, Muon and Signum.
        betas: Adam's betas.
        eps: Adam's epsilon (down to 1e-16, where Adam's implicit bias is l-infinity).
        weight_decay: decoupled weight decay (0 keeps the margin-maximisation regime).
        lr_schedule: ``constant``, ``inv_sqrt`` (lr / sqrt(1 + t / 100)), ``cosine``, or
            ``loss_normalized`` (lr / L(theta_t), capped at ``max_lr_factor`` * lr): normalised
            GD, which reaches the max-margin direction far faster on separable data (Nacson et
            al., AISTATS 2019; Lyu & Li, ICLR 2020).
        max_lr_factor: cap of the loss-normalised learning-rate multiplier.
        muon_other_lr: learning rate of the Adam that Muon's non-matrix parameters use.
        stop_loss: stop early once the training loss falls below this.
        log_every: steps between history records.
        seed: seed of mini-batch sampling.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    optimizer: OptimizerName = "gd"
    lr: float = Field(0.5, gt=0)
    steps: int = Field(1000, ge=1)
    batch_size: int | None = Field(None, ge=1)
    loss: LossName = "logistic"
    momentum: float = Field(0.0, ge=0, lt=1)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(1e-8, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    lr_schedule: Literal["constant", "inv_sqrt", "cosine", "loss_normalized"] = "constant"
    max_lr_factor: float = Field(1e4, ge=1)
    muon_other_lr: float = Field(1e-3, gt=0)
    stop_loss: float = Field(0.0, ge=0)
    log_every: int = Field(100, ge=1)
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        if self.optimizer == "gd" and self.batch_size is not None:
            raise ValueError("optimizer 'gd' is full batch: leave batch_size unset or use 'sgd'")
        if not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must lie in [0, 1), received {self.betas}")
        return self
