"""Informed-adversary attacks on a DP-SGD trajectory: posterior mean, MAP, population mean.

The adversary knows every other record, sees theta_0 .. theta_T and the other records' batch
membership (:class:`~trainleak.releases.dp.DPTrajectory`), and knows the prior: a pool of
labelled candidate records from which the target was drawn uniformly. Under that prior the
posterior mean over the pool is the Bayes (minimum mean squared error) estimator, so it is the
strongest attack against a lower bound on expected squared error; the MAP attack ascends the
trajectory likelihood over a continuous input instead.

References:
    Balle, Cherubin & Hayes, *Reconstructing Training Data with Informed Adversaries*,
    S&P 2022, arXiv 2201.04845.
    Hayes, Mahloujifar & Balle, *Bounding Training Data Reconstruction in DP-SGD*,
    NeurIPS 2023, arXiv 2302.07225 (the prior-aware attack).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.informed._trajectory import TrajectoryModel
from trainleak.errors import MissingKnowledgeError, ShapeError
from trainleak.progress import Progress, report_every
from trainleak.releases.dp import DPTrajectory
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param

Statistic = Literal["mean", "median"]


def pool_labels(knowledge: Knowledge) -> torch.Tensor:
    """Labels of the prior pool: ``labels`` of length ``len(prior)``, or one known label.

    Raises:
        ShapeError: ``labels`` is neither of length 1 nor of the pool's length.
    """
    if knowledge.prior is None or knowledge.labels is None:
        raise MissingKnowledgeError("this attack needs Knowledge fields: prior, labels")
    n, labels = knowledge.prior.shape[0], knowledge.labels.reshape(-1).long()
    if labels.numel() == 1:
        return labels.expand(n).clone()
    if labels.numel() != n:
        raise ShapeError(
            f"Knowledge.labels must hold one label per prior record ({n}) or the target's "
            f"label (1), received {labels.numel()}"
        )
    return labels


def _others(knowledge: Knowledge) -> tuple[torch.Tensor, torch.Tensor]:
    if knowledge.other_records is None:
        raise MissingKnowledgeError("this attack needs Knowledge fields: other_records")
    return knowledge.other_records


@register_attack
@dataclass(frozen=True, kw_only=True)
class PosteriorMeanAttack(Attack[DPTrajectory]):
    """Posterior mean over a candidate pool under the exact trajectory likelihood.

    Args:
        temperature: divide the log-likelihood by this before normalising (1 = exact Bayes).

    Example:
        >>> PosteriorMeanAttack().temperature
        1.0
    """

    name: ClassVar[str] = "dpsgd-posterior-mean"
    summary: ClassVar[str] = (
        "prior-aware posterior mean over a candidate pool from a DP-SGD trajectory "
        "(informed adversary; Hayes et al. 2023)"
    )
    release_type: ClassVar[type[DPTrajectory]] = DPTrajectory
    requires: ClassVar[frozenset[str]] = frozenset(
        {"input_shape", "prior", "labels", "other_records"}
    )

    temperature: float = param(1.0, gt=0)

    def run(
        self,
        release: DPTrajectory,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        if knowledge.prior is None:
            raise MissingKnowledgeError("this attack needs Knowledge fields: prior")
        tm = TrajectoryModel(release)
        res = tm.residuals(_others(knowledge))
        pool = knowledge.prior.double()
        with torch.no_grad():
            ll = tm.log_likelihood(res, pool, pool_labels(knowledge))
        w = torch.softmax(ll / self.temperature, 0)
        mean = (w.view(-1, *([1] * (pool.ndim - 1))) * pool).sum(0, keepdim=True)
        report_every(progress, "posterior mean", 1, 1)
        return Reconstruction(
            inputs=mean.float(),
            scores=w.max().reshape(1).float(),
            diagnostics={
                "posterior_max": float(w.max()),
                "posterior_argmax": int(w.argmax()),
                "posterior_entropy": float(-(w * w.clamp_min(1e-300).log()).sum()),
                "posterior_weights": w,
                "log_likelihood": ll,
            },
        )


@register_attack
@dataclass(frozen=True, kw_only=True)
class MAPTrajectoryAttack(Attack[DPTrajectory]):
    """MAP reconstruction: gradient ascent of the trajectory likelihood over the input.

    [inferred] Restarts start from the ``restarts`` most likely pool candidates (each keeps its
    label); Adam ascends the log-likelihood with inputs clamped to ``value_range``; the restart
    of highest final likelihood is returned.

    Args:
        steps: Adam steps per restart.
        restarts: number of restarts.
        lr: Adam learning rate.
    """

    name: ClassVar[str] = "dpsgd-map"
    summary: ClassVar[str] = (
        "MAP by gradient ascent on the DP-SGD trajectory likelihood (informed adversary)"
    )
    release_type: ClassVar[type[DPTrajectory]] = DPTrajectory
    requires: ClassVar[frozenset[str]] = frozenset(
        {"input_shape", "prior", "labels", "other_records", "value_range"}
    )

    steps: int = param(30, ge=0)
    restarts: int = param(4, ge=1)
    lr: float = param(0.05, gt=0)

    def run(
        self,
        release: DPTrajectory,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        if knowledge.prior is None or knowledge.value_range is None:
            raise MissingKnowledgeError("this attack needs Knowledge fields: prior, value_range")
        tm = TrajectoryModel(release)
        res = tm.residuals(_others(knowledge))
        pool, labels = knowledge.prior.double(), pool_labels(knowledge)
        with torch.no_grad():
            ll0 = tm.log_likelihood(res, pool, labels)
        k = min(self.restarts, pool.shape[0])
        top = ll0.topk(k).indices
        x = pool[top].clone().requires_grad_(True)
        y = labels[top]
        lo, hi = knowledge.value_range
        opt = torch.optim.Adam([x], lr=self.lr)
        trace: list[dict[str, float]] = []
        for step in range(self.steps):
            opt.zero_grad(set_to_none=True)
            ll = tm.log_likelihood(res, x, y)
            (-ll.sum()).backward()
            opt.step()
            with torch.no_grad():
                x.clamp_(lo, hi)
            trace.append({"step": float(step), "loss": float(-ll.detach().max())})
            report_every(progress, "map trajectory attack", step + 1, self.steps, 10)
        with torch.no_grad():
            final = tm.log_likelihood(res, x, y)
        best = int(final.argmax())
        return Reconstruction(
            inputs=x.detach()[best : best + 1].float(),
            labels=y[best : best + 1],
            scores=final[best : best + 1].float(),
            diagnostics={"log_likelihood": float(final[best]), "start_index": int(top[best])},
            trace=trace,
        )


@register_attack
@dataclass(frozen=True, kw_only=True)
class PopulationMeanBaseline(Attack[DPTrajectory]):
    """The trivial baseline: the mean of the prior, ignoring the release.

    Its expected squared error is the prior variance, which every lower bound must stay below.

    Args:
        statistic: ``mean`` (the best constant guess for squared error) or ``median``
            (coordinate-wise; the best constant guess for absolute error).
    """

    name: ClassVar[str] = "population-mean"
    summary: ClassVar[str] = "baseline: the prior mean (ignores the release)"
    release_type: ClassVar[type[DPTrajectory]] = DPTrajectory
    requires: ClassVar[frozenset[str]] = frozenset({"input_shape", "prior"})

    statistic: Statistic = param("mean", choices=Statistic)

    def run(
        self,
        release: DPTrajectory,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        if knowledge.prior is None:
            raise MissingKnowledgeError("this attack needs Knowledge fields: prior")
        prior = knowledge.prior.float()
        if self.statistic == "median":
            return Reconstruction(inputs=prior.median(0, keepdim=True).values)
        return Reconstruction(inputs=prior.mean(0, keepdim=True))
