"""Deep Leakage from Gradients (DLG) and its improved-label variant (iDLG).

DLG optimises dummy inputs *and* dummy soft labels with L-BFGS so that their gradient matches
the observed one in squared Euclidean distance. iDLG reads the labels off the output layer's
bias gradient first (exact for one sample) and optimises only the inputs.

References:
    Zhu, Liu, Han, *Deep Leakage from Gradients*, NeurIPS 2019, Algorithm 1.
    Zhao, Mopuri, Bilen, *iDLG: Improved Deep Leakage from Gradients*, arXiv 2001.02610, Sec. 3.
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
)
from trainleak.errors import ConfigError
from trainleak.progress import Progress, report_every
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param


def batch_size_of(release: GradientUpdate, knowledge: Knowledge) -> int:
    """B from the release, else from ``knowledge.n_records``; a clear error otherwise."""
    b = release.batch_size if release.batch_size is not None else knowledge.n_records
    if b is None:
        raise ConfigError.invalid(
            "release.batch_size", "the batch size (or Knowledge(n_records=...))", None
        )
    return int(b)


@register_attack
@dataclass(frozen=True, kw_only=True)
class DLG(FedSGDAttack):
    """Deep Leakage from Gradients: joint L-BFGS over inputs and soft labels.

    Args:
        iterations: L-BFGS outer iterations (the paper: 300).
        lr: L-BFGS learning rate.
        recover_labels_first: use iDLG's label rule instead of optimising labels.
        log_every: iterations between trace records.

    Example:
        >>> # upd: a GradientUpdate of a 12-input MLP on one sample (see tests/release_fixtures.py)
        >>> upd, kn = tiny_honest_update(batch=1)  # doctest: +SKIP
        >>> DLG(iterations=3)(upd, kn).inputs.shape  # doctest: +SKIP
        torch.Size([1, 12])
    """

    name: ClassVar[str] = "dlg"
    summary: ClassVar[str] = "Deep Leakage from Gradients: L-BFGS gradient matching (Zhu 2019)"
    release_type: ClassVar[type[GradientUpdate]] = GradientUpdate

    iterations: int = param(300, ge=1)
    lr: float = param(1.0, gt=0)
    recover_labels_first: bool = False
    log_every: int = param(10, ge=1)

    def run(
        self,
        release: GradientUpdate,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        require_fedsgd(release, type(self).__name__)
        model = release_model(release)
        b, shape = batch_size_of(release, knowledge), input_shape(release, knowledge)
        target = [release.update[k] for k, _ in model.named_parameters()]
        dtype = target[0].dtype
        x = torch.randn(b, *shape, generator=generator, dtype=dtype).requires_grad_(True)
        n_cls = int(model(x[:1]).shape[1])
        fixed = knowledge.labels if knowledge.labels is not None else None
        if fixed is None and self.recover_labels_first:
            fixed = recover_labels(release, b)
        soft = torch.randn(b, n_cls, generator=generator, dtype=dtype).requires_grad_(True)
        params = [x] if fixed is not None else [x, soft]
        opt = torch.optim.LBFGS(params, lr=self.lr, max_iter=1, history_size=100)
        dist = GradientDistance("l2")
        trace: list[dict[str, float]] = []

        def closure() -> torch.Tensor:
            opt.zero_grad()
            lab = fixed if fixed is not None else torch.softmax(soft, 1)
            loss = dist(candidate_gradient(model, x, lab), target)
            loss.backward()
            return loss

        for it in range(self.iterations):
            loss = opt.step(closure)
            if it % self.log_every == 0 or it == self.iterations - 1:
                trace.append({"step": float(it), "loss": float(loss.detach())})
                report_every(progress, self.name, it + 1, self.iterations, self.log_every)
            if not bool(torch.isfinite(loss.detach())):
                break
        labels = fixed if fixed is not None else soft.detach().argmax(1)
        return Reconstruction(
            inputs=x.detach(),
            labels=labels.clone(),
            diagnostics={"final_loss": trace[-1]["loss"] if trace else float("nan")},
            trace=trace,
        )


@register_attack
@dataclass(frozen=True, kw_only=True)
class IDLG(DLG):
    """iDLG: labels read from the output bias gradient, then L-BFGS over the inputs only."""

    name: ClassVar[str] = "idlg"
    summary: ClassVar[str] = "iDLG: analytic labels, then DLG on the inputs (Zhao 2020)"

    recover_labels_first: bool = True
