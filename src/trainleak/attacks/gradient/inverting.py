"""Inverting Gradients: cosine gradient matching with a total-variation prior and restarts.

Each restart draws Gaussian inputs and minimises ``1 - cos(grad(x), observed) + alpha TV(x)``
with Adam on the *sign* of the gradient, projecting onto the value range after every step and
(``schedule="step"``, the paper's) dividing the learning rate by 10 at 3/8, 5/8 and 7/8 of the
iterations. The restart with the lowest final objective is returned. Labels come from the
knowledge when given, else from the output-layer bias gradient (iDLG's rule for B = 1).

Per iteration the cost is one forward pass, one backward pass that keeps its graph and one
backward pass through that graph (the double backward). The target's norm is computed once,
the cosine's three sums share one pass over the gradients, and ``channels_last=True`` runs the
convolutions in NHWC layout (faster for several images per batch on some CPUs; see
``benchmarks/inverting_gradients.py``).

References:
    Geiping, Bauermeister, Droege, Moeller, *Inverting Gradients - How easy is it to break
    privacy in federated learning?*, NeurIPS 2020, Sec. 4 (Eq. 4) and Appendix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Reconstruction, register_attack
from trainleak.attacks.gradient._common import (
    FedSGDAttack,
    input_shape,
    release_model,
    require_fedsgd,
)
from trainleak.attacks.gradient._objectives import (
    candidate_gradient,
    recover_labels,
    total_variation,
)
from trainleak.attacks.gradient.dlg import batch_size_of
from trainleak.errors import ConfigError
from trainleak.progress import Progress, report_every
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param, torch_device


@register_attack
@dataclass(frozen=True, kw_only=True)
class InvertingGradients(FedSGDAttack):
    """Geiping et al.'s attack (cosine distance + TV, signed Adam, box constraint, restarts).

    Args:
        iterations: Adam steps per restart (the paper: 24 000; scale down on CPUs).
        restarts: independent trials; the lowest objective wins.
        lr: Adam learning rate.
        tv_weight: weight ``alpha`` of total variation.
        signed: use the sign of the gradient (as the paper).
        schedule: ``"step"`` (learning rate divided by 10 at 3/8, 5/8, 7/8 of the
            iterations, the paper's), ``"cosine"`` (cosine annealing to 0) or ``"none"``.
        init: the first iterate: ``"randn"`` (the paper's), ``"uniform"`` (over the value
            range, or [0, 1] without one) or ``"prior-mean"`` (the mean of the declared
            prior samples, e.g. public images, plus Gaussian noise of 0.1 of their standard
            deviation; needs ``knowledge.prior``).
        layer_weights: ``"joint"`` (one cosine over all parameters, the paper's) or
            ``"per-tensor"`` (the mean of one cosine per parameter tensor, so the first
            layers, which carry most of the input, are not drowned by the last ones).
        channels_last: run image inputs and the model in channels-last memory layout.
        device: where the optimisation runs (``"cpu"``, ``"cuda"``, ...); the result is
            returned on the CPU.
        snapshot_every: keep the best restart's inputs every this many steps (0: never), for
            quality-against-iterations curves.
        log_every: steps between trace records.

    Example:
        >>> # a tiny release: see tests/release_fixtures.py
        >>> upd, kn = tiny_honest_update(batch=1)  # doctest: +SKIP
        >>> InvertingGradients(iterations=5, restarts=1)(upd, kn).inputs.shape  # doctest: +SKIP
        torch.Size([1, 12])
    """

    name: ClassVar[str] = "inverting-gradients"
    summary: ClassVar[str] = (
        "Inverting Gradients: cosine gradient matching + total variation (Geiping 2020)"
    )
    release_type: ClassVar[type[GradientUpdate]] = GradientUpdate

    iterations: int = param(2000, ge=1)
    restarts: int = param(1, ge=1)
    lr: float = param(0.1, gt=0)
    tv_weight: float = param(1e-4, ge=0)
    signed: bool = True
    schedule: str = param("step", choices=("step", "cosine", "none"))
    init: str = param("randn", choices=("randn", "uniform", "prior-mean"))
    channels_last: bool = False
    layer_weights: str = param("joint", choices=("joint", "per-tensor"))
    device: str = "cpu"
    snapshot_every: int = param(0, ge=0)
    log_every: int = param(50, ge=1)

    def run(
        self,
        release: GradientUpdate,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        require_fedsgd(release, type(self).__name__)
        dev = torch_device("device", self.device)
        model = release_model(release).to(dev)
        b = batch_size_of(release, knowledge)
        labels = knowledge.labels if knowledge.labels is not None else recover_labels(release, b)
        labels = labels.to(dev)
        best: _Trial | None = None
        for r in range(self.restarts):
            trial = self._trial(model, release, knowledge, labels, generator, progress, r)
            if best is None or trial.loss < best.loss:
                best = trial
        if best is None:
            raise RuntimeError("internal invariant violated: best is not None")
        return Reconstruction(
            inputs=best.x.cpu(),
            labels=labels.cpu().clone(),
            diagnostics={"final_loss": best.loss, "snapshots": best.snapshots},
            trace=best.trace,
        )

    def _trial(
        self,
        model: torch.nn.Module,
        release: GradientUpdate,
        knowledge: Knowledge,
        labels: torch.Tensor,
        generator: torch.Generator,
        progress: Progress | None,
        restart: int,
    ) -> _Trial:
        shape = input_shape(release, knowledge)
        objective = _CosineObjective(model, release, labels, self.layer_weights == "per-tensor")
        lo, hi = knowledge.value_range or (float("-inf"), float("inf"))
        x = self._start(len(labels), shape, objective.dtype, knowledge, generator)
        x = x.to(labels.device)
        if self.channels_last and x.ndim == 4:
            model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
            x = x.contiguous(memory_format=torch.channels_last)
        x.requires_grad_(True)
        opt = torch.optim.Adam([x], lr=self.lr)
        sched = _scheduler(opt, self.schedule, self.iterations)
        n, out = self.iterations, _Trial(x.detach(), float("inf"), [], [])
        for it in range(n):
            loss = objective(x) + self.tv_weight * total_variation(x)
            (g,) = torch.autograd.grad(loss, [x])
            x.grad = g.sign() if self.signed else g
            opt.step()
            if sched is not None:
                sched.step()
            with torch.no_grad():
                x.clamp_(lo, hi)
            out.loss = float(loss.detach())
            if it % self.log_every == 0 or it == n - 1:
                out.trace.append({"step": float(it), "loss": out.loss, "restart": float(restart)})
                report_every(progress, self.name, it + 1, n, self.log_every)
            if self.snapshot_every and (it + 1) % self.snapshot_every == 0:
                out.snapshots.append((it + 1, x.detach().contiguous().cpu().clone()))
        out.x = x.detach().contiguous()
        return out

    def _start(
        self,
        n: int,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        knowledge: Knowledge,
        generator: torch.Generator,
    ) -> torch.Tensor:
        """The first iterate: Gaussian, uniform over the box, or around the prior's mean."""
        lo, hi = knowledge.value_range or (float("-inf"), float("inf"))
        if self.init == "prior-mean":
            if knowledge.prior is None:
                raise ConfigError.invalid("knowledge.prior", "samples for init='prior-mean'", None)
            prior = knowledge.prior.to(dtype).reshape(-1, *shape)
            noise = torch.randn(n, *shape, generator=generator, dtype=dtype)
            return (prior.mean(0) + 0.1 * prior.std(0) * noise).clamp(lo, hi)
        if self.init == "uniform":
            a, b = (lo, hi) if lo > float("-inf") and hi < float("inf") else (0.0, 1.0)
            return a + (b - a) * torch.rand(n, *shape, generator=generator, dtype=dtype)
        return torch.randn(n, *shape, generator=generator, dtype=dtype).clamp(lo, hi)


class _CosineObjective:
    """``1 - cos(grad(x), target)`` over all parameters, the target's norm computed once."""

    def __init__(
        self,
        model: torch.nn.Module,
        release: GradientUpdate,
        labels: torch.Tensor,
        per_tensor: bool = False,
    ):
        self.model, self.labels, self.per_tensor = model, labels, per_tensor
        dev = labels.device
        self.target = [release.update[k].detach().to(dev) for k, _ in model.named_parameters()]
        self.dtype = self.target[0].dtype
        norms = torch.stack([torch.sqrt((t * t).sum()) for t in self.target])
        self.target_norms = norms.clamp_min(1e-30)
        self.target_norm = torch.sqrt((norms**2).sum()).clamp_min(1e-30)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        grads = candidate_gradient(self.model, x, self.labels)
        dots = torch.stack([(g * t).sum() for g, t in zip(grads, self.target)])
        sqs = torch.stack([(g * g).sum() for g in grads])
        if self.per_tensor:
            cos = dots / (torch.sqrt(sqs).clamp_min(1e-30) * self.target_norms)
            return 1 - cos.mean()
        return 1 - dots.sum() / (torch.sqrt(sqs.sum()) * self.target_norm).clamp_min(1e-30)


def _scheduler(
    opt: torch.optim.Optimizer, kind: str, n: int
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The paper's step decay, cosine annealing, or none."""
    if kind == "step":
        milestones = [int(n * f) for f in (3 / 8, 5 / 8, 7 / 8)]
        return torch.optim.lr_scheduler.MultiStepLR(opt, milestones, gamma=0.1)
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=n)
    return None


@dataclass
class _Trial:
    x: torch.Tensor
    loss: float
    trace: list[dict[str, float]]
    snapshots: list[tuple[int, torch.Tensor]]
