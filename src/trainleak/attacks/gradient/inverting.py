"""Inverting Gradients: cosine gradient matching with a total-variation prior and restarts.

Each restart draws Gaussian inputs and minimises ``1 - cos(grad(x), observed) + alpha TV(x)``
with Adam on the *sign* of the gradient, projecting onto the value range after every step and
dividing the learning rate by 10 at 3/8, 5/8 and 7/8 of the iterations. The restart with the
lowest final objective is returned. Labels come from the knowledge when given, else from the
output-layer bias gradient (iDLG's rule for B = 1).

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
    GradientDistance,
    candidate_gradient,
    recover_labels,
    total_variation,
)
from trainleak.attacks.gradient.dlg import batch_size_of
from trainleak.progress import Progress, report_every
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param


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
        model = release_model(release)
        b = batch_size_of(release, knowledge)
        labels = knowledge.labels if knowledge.labels is not None else recover_labels(release, b)
        best: _Trial | None = None
        for r in range(self.restarts):
            trial = self._trial(model, release, knowledge, labels, generator, progress, r)
            if best is None or trial.loss < best.loss:
                best = trial
        if best is None:
            raise RuntimeError("internal invariant violated: best is not None")
        return Reconstruction(
            inputs=best.x,
            labels=labels.clone(),
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
        target = [release.update[k] for k, _ in model.named_parameters()]
        lo, hi = knowledge.value_range or (float("-inf"), float("inf"))
        x = torch.randn(len(labels), *shape, generator=generator, dtype=target[0].dtype)
        x = x.clamp(lo, hi).requires_grad_(True)
        opt = torch.optim.Adam([x], lr=self.lr)
        n = self.iterations
        milestones = [int(n * f) for f in (3 / 8, 5 / 8, 7 / 8)]
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones, gamma=0.1)
        dist, out = GradientDistance("cosine"), _Trial(x.detach(), float("inf"), [], [])
        for it in range(n):
            opt.zero_grad()
            loss = dist(candidate_gradient(model, x, labels), target)
            loss = loss + self.tv_weight * total_variation(x)
            (g,) = torch.autograd.grad(loss, [x])
            x.grad = g.sign() if self.signed else g
            opt.step()
            sched.step()
            with torch.no_grad():
                x.clamp_(lo, hi)
            out.loss = float(loss.detach())
            if it % self.log_every == 0 or it == n - 1:
                out.trace.append({"step": float(it), "loss": out.loss, "restart": float(restart)})
                report_every(progress, self.name, it + 1, n, self.log_every)
            if self.snapshot_every and (it + 1) % self.snapshot_every == 0:
                out.snapshots.append((it + 1, x.detach().clone()))
        out.x = x.detach()
        return out


@dataclass
class _Trial:
    x: torch.Tensor
    loss: float
    trace: list[dict[str, float]]
    snapshots: list[tuple[int, torch.Tensor]]
