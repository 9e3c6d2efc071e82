"""One training loop for GD, SGD, Adam, Muon and Signum, producing a Checkpoint release."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.registry import build_model
from trainleak.models.spec import ModelSpec
from trainleak.progress import Progress, report_every
from trainleak.releases.checkpoint import Checkpoint, OptimizerSpec, TrainingSpec
from trainleak.systems.training.config import TrainConfig
from trainleak.systems.training.optimizers import lr_factor, make_optimizers


@dataclass
class History:
    """What happened during training, one record every ``log_every`` steps."""

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    min_margin: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[float] | list[int]]:
        return {
            "step": self.step,
            "loss": self.loss,
            "min_margin": self.min_margin,
            "seconds": self.seconds,
        }

    def steps_to_margin(self, threshold: float) -> int | None:
        """First logged step whose minimum margin reaches ``threshold`` (None if never)."""
        return next((s for s, m in zip(self.step, self.min_margin) if m >= threshold), None)


def margins(out: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """Per-sample margins: y*f(x) (labels +-1) for logistic, f_y - max_{j!=y} f_j for CE."""
    if loss == "logistic":
        return out.squeeze(1) * (2.0 * y.to(out.dtype) - 1.0)
    true = out.gather(1, y.view(-1, 1)).squeeze(1)
    other = out.scatter(1, y.view(-1, 1), float("-inf")).amax(1)
    return true - other


def loss_fn(out: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """Mean logistic loss log(1 + exp(-margin)) or cross-entropy."""
    if loss == "logistic":
        return F.softplus(-margins(out, y, loss)).mean()
    return F.cross_entropy(out, y)


def _check_data(model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig) -> None:
    if x.shape[0] != y.shape[0]:
        raise ShapeError(f"x has {x.shape[0]} samples but y has {y.shape[0]}")
    with torch.no_grad():
        out = model(x[:1])
    if cfg.loss == "logistic" and out.shape[1] != 1:
        raise ConfigError.invalid("loss", "'cross_entropy' for a multi-output model", cfg.loss)
    if cfg.loss == "logistic" and not bool(((y == 0) | (y == 1)).all()):
        raise ConfigError.invalid(
            "y", "labels in {0, 1} for the logistic loss", y.unique().tolist()
        )


def train(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: TrainConfig,
    *,
    progress: Progress | None = None,
) -> History:
    """Train ``model`` in place on ``(x, y)``; return the history."""
    _check_data(model, x, y, cfg)
    opts = make_optimizers(model, cfg)
    base_lrs = [[g["lr"] for g in o.param_groups] for o in opts]
    gen = torch.Generator().manual_seed(cfg.seed)
    hist, start, n = History(), time.perf_counter(), x.shape[0]
    for step in range(cfg.steps + 1):
        if cfg.batch_size is None or cfg.batch_size >= n:
            xb, yb = x, y
        else:
            idx = torch.randperm(n, generator=gen)[: cfg.batch_size]
            xb, yb = x[idx], y[idx]
        out = model(xb)
        loss = loss_fn(out, yb, cfg.loss)
        if step % cfg.log_every == 0 or step == cfg.steps:
            _log(hist, model, x, y, cfg, step, start)
            report_every(progress, "train", step, cfg.steps, 1)
            if hist.loss[-1] < cfg.stop_loss:
                break
        if step == cfg.steps:
            break
        for o, lrs in zip(opts, base_lrs):
            for g, lr in zip(o.param_groups, lrs):
                g["lr"] = lr * lr_factor(cfg, step, loss.item())
            o.zero_grad(set_to_none=True)
        loss.backward()
        for o in opts:
            o.step()
    return hist


def _log(
    hist: History,
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: TrainConfig,
    step: int,
    start: float,
) -> None:
    with torch.no_grad():
        out = model(x)
        hist.step.append(step)
        hist.loss.append(float(loss_fn(out, y, cfg.loss)))
        hist.min_margin.append(float(margins(out, y, cfg.loss).min()))
        hist.seconds.append(time.perf_counter() - start)


def optimizer_spec(cfg: TrainConfig) -> OptimizerSpec:
    """The optimizer metadata a checkpoint records."""
    params: dict[str, object] = {
        "momentum": cfg.momentum,
        "weight_decay": cfg.weight_decay,
        "batch_size": cfg.batch_size,
        "lr_schedule": cfg.lr_schedule,
    }
    if cfg.optimizer == "adam":
        params.update(betas=list(cfg.betas), eps=cfg.eps)
    if cfg.optimizer == "muon":
        params.update(other_params_optimizer="adamw", other_params_lr=cfg.muon_other_lr)
    return OptimizerSpec(name=cfg.optimizer, lr=cfg.lr, params=params)


def train_checkpoint(
    spec: ModelSpec,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: TrainConfig,
    *,
    init_seed: int = 0,
    progress: Progress | None = None,
) -> tuple[Checkpoint, History]:
    """Build ``spec`` from ``init_seed``, train it, and release it as a :class:`Checkpoint`.

    The checkpoint carries the initial weights and the optimizer metadata (the threat model
    decides whether an attack may use them).
    """
    model = build_model(spec, seed=init_seed)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    hist = train(model, x, y, cfg, progress=progress)
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}
    training = TrainingSpec(
        loss=cfg.loss,
        steps=hist.step[-1],
        n_train=int(x.shape[0]),
        batch_size=cfg.batch_size,
        final_loss=hist.loss[-1],
        min_margin=hist.min_margin[-1],
        extra={"seconds": hist.seconds[-1]},
    )
    ckpt = Checkpoint(
        architecture=spec,
        final=final,
        initial=initial,
        optimizer=optimizer_spec(cfg),
        training=training,
    )
    return ckpt, hist
