"""Training-set reconstruction from a released checkpoint via its KKT conditions.

Gradient flow on a homogeneous network with logistic or exponential loss converges in
direction to a KKT point of the max-margin problem min ||theta||^2 s.t. y_i Phi(theta; x_i) >= 1
(Lyu & Li, ICLR 2020; Ji & Telgarsky 2020). Its stationarity condition says that the released
weights are a non-negative combination of per-sample output gradients:

    theta = sum_i lambda_i y_i grad_theta Phi(theta; x_i),   lambda_i >= 0.

The attack searches candidates x_k and multipliers lambda_k that satisfy this equation for the
released theta (Haim, Vardi, Yehudai, Shamir & Irani, *Reconstructing Training Data from
Trained Neural Networks*, NeurIPS 2022, arXiv 2206.07758). For C > 1 outputs the condition
has one multiplier per (sample, wrong class) pair (Buzaglo et al., *Deconstructing Data
Reconstruction: Multiclass, Weight Decay and General Losses*, NeurIPS 2023, arXiv 2307.01827):

    theta = sum_i sum_{j != y_i} lambda_ij grad_theta (Phi_{y_i} - Phi_j)(theta; x_i).

Per-candidate gradients are never formed one by one: the combination is the gradient of the
single scalar sum_k <coef_k, Phi(theta; x_k)>, taken with ``create_graph=True`` so that the
objective can be differentiated again with respect to the candidates.

Defaults (issue 11, ``benchmarks/results/kkt_reference.md``): Haim et al.'s parametrisation
(SGD with momentum 0.9 on candidates and multipliers, the combination averaged over candidates
with minimum multiplier 0.415, init scale 0.00174, gate sharpness 19.2) with two changes: the
multiplier learning rate is 0.01 instead of 1e-4 (per unit of the absolute residual), and the
residual is divided by ||theta||^2 with the learning rates multiplied, and the penalty weights
divided, by 23.1, the ||theta||^2 of the MNIST benchmark checkpoint on which the reference's
settings were tuned. On that checkpoint this takes the reference's steps; on another the
candidates' step no longer grows with ||theta||^2 (the gradient of the absolute residual in x
does). :data:`ADAM_FIT` holds the former defaults (Adam on candidates and multipliers,
multipliers scaled by a least-squares fit): fewer iterations to a first reconstruction, more
specific reconstructions, but a plateau after about 1000 iterations on the MNIST checkpoint.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.checkpoint._network import ReleasedMLP
from trainleak.attacks.checkpoint.targets import TARGETS, make_target, target_for_optimizer
from trainleak.progress import Progress, report_every
from trainleak.releases.checkpoint import Checkpoint
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param, torch_device

Optimizer = Literal["sgd", "adam"]
MultiplierScale = Literal["fit", "mean"]
Residual = Literal["relative", "absolute"]
Schedule = Literal["constant", "cosine"]

# The defaults until the follow-up of issue 11 (Adam, least-squares multiplier scale): the
# settings the kkt-reconstruction and optimizer-fingerprints experiments and assessments use.
ADAM_FIT: dict[str, Any] = {
    "optimizer": "adam",
    "lr_x": 0.01,
    "lr_lambda": 0.01,
    "lambda_min": 0.05,
    "init_std": 0.03,
    "bound_weight": 1.0,
    "lambda_weight": 5.0,
    "multiplier_scale": "fit",
    "residual": "relative",
}


@register_attack
@dataclass(frozen=True, kw_only=True)
class KKTReconstruction(Attack[Checkpoint]):
    """Reconstruct training inputs from a homogeneous MLP's weights (Haim et al. 2022).

    Args:
        n_candidates: number of candidates m (the paper uses twice the training-set size).
        steps: optimisation steps.
        lr_x: learning rate of the candidates.
        lr_lambda: learning rate of the (scaled) multipliers.
        momentum: SGD momentum.
        lambda_min: lower target of the scaled multipliers (penalised below it).
        relu_alpha: sharpness of the sigmoid gate used in the backward pass.
        init_std: standard deviation of the Gaussian initial candidates.
        bound_weight: weight of the penalty keeping candidates inside ``value_range``.
        lambda_weight: weight of the multiplier penalty.
        optimizer: ``sgd`` (with momentum, as the paper) or ``adam``.
        multiplier_scale: how the multipliers enter the combination: ``fit`` multiplies them
            by the least-squares scale of the initial combination; ``mean`` divides the
            combination by the number of candidates (Haim et al.'s parametrisation, in which
            ``lambda_min`` forces every candidate to carry a share of theta).
        residual: ``relative`` divides the KKT residual by ||theta||^2; ``absolute`` does not
            (Haim et al.), which sets how strongly the KKT term weighs against the penalties
            and how large a step ``lr_x`` makes.
        target: the stationarity target (see :mod:`.targets`): ``l2`` for GD/SGD, ``spectral``
            or ``spectral_psd`` for Muon, ``linf`` for Adam and Signum; ``auto`` reads the
            checkpoint's optimizer metadata (``l2`` when it has none).
        log_every: steps between trace records.

    Example:
        >>> attack = KKTReconstruction(n_candidates=8, steps=5)
        >>> attack.n_candidates
        8
    """

    name: ClassVar[str] = "kkt"
    summary: ClassVar[str] = (
        "KKT-condition reconstruction of training inputs from a homogeneous MLP checkpoint "
        "(Haim et al. 2022; multi-class per Buzaglo et al. 2023)"
    )
    release_type: ClassVar[type[Checkpoint]] = Checkpoint
    requires: ClassVar[frozenset[str]] = frozenset({"input_shape", "value_range"})

    n_candidates: int = param(200, ge=1)
    steps: int = param(10_000, ge=0)
    lr_x: float = param(6.5, gt=0)
    lr_lambda: float = param(0.23, gt=0)
    momentum: float = param(0.9, ge=0, lt=1)
    lambda_min: float = param(0.415, ge=0)
    relu_alpha: float = param(19.2, gt=0)
    init_std: float = param(0.00174, gt=0)
    bound_weight: float = param(0.043, ge=0)
    lambda_weight: float = param(0.22, ge=0)
    optimizer: Optimizer = param("sgd", choices=Optimizer)
    multiplier_scale: MultiplierScale = param("mean", choices=MultiplierScale)
    residual: Residual = param("relative", choices=Residual)
    target: Literal["auto", "l2", "spectral", "spectral_psd", "linf"] = param(
        "auto", choices=("auto", *TARGETS)
    )
    lr_schedule: Schedule = param("constant", choices=Schedule)
    device: str = "cpu"
    log_every: int = param(100, gt=0)

    def resolve_target(self, release: Checkpoint) -> str:
        """The target to use; warns when it contradicts the recorded optimizer."""
        recorded = release.optimizer.name if release.optimizer else None
        implied = target_for_optimizer(recorded)
        if self.target == "auto":
            return implied
        if recorded is not None and self.target.split("_")[0] != implied:
            warnings.warn(
                f"KKT target {self.target!r} does not match the recorded optimizer "
                f"{recorded!r}, whose implicit bias implies target {implied!r}",
                stacklevel=3,
            )
        return self.target

    def run(
        self,
        release: Checkpoint,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        net = ReleasedMLP.from_checkpoint(release).to(torch_device("device", self.device))
        target = self.resolve_target(release)
        problem = KKTProblem(net, self, target, knowledge.value_range, generator)
        trace = problem.optimise(progress)
        x = problem.candidates().cpu()
        return Reconstruction(
            inputs=x.reshape(self.n_candidates, *tuple(knowledge.input_shape or ())),
            labels=problem.labels.cpu(),
            scores=problem.lam_eff().detach().sum(1).cpu(),
            diagnostics={
                "kkt_loss_initial": trace[0]["kkt"] if trace else float("nan"),
                "kkt_loss_final": trace[-1]["kkt"] if trace else float("nan"),
                "lambda_scale": problem.lambda_scale,
                "target": target,
            },
            trace=trace,
        )


class KKTProblem:
    """The optimisation state of one KKT reconstruction (or of a residual evaluation).

    With ``fixed_x`` (and ``fixed_labels``) the candidates are the given inputs and only the
    multipliers and target parameters are optimised: the KKT residual of a known set.
    """

    def __init__(
        self,
        net: ReleasedMLP,
        hp: KKTReconstruction,
        target: str,
        value_range: tuple[float, float] | None,
        generator: torch.Generator,
        *,
        fixed_x: torch.Tensor | None = None,
        fixed_labels: torch.Tensor | None = None,
    ) -> None:
        self.net, self.hp = net, hp
        dev = net.weights[0].device
        self.theta = [p.requires_grad_(True) for p in net.parameters()]
        self.target = make_target(target, self.theta)
        lo, hi = value_range or (-1.0, 1.0)
        self.lo, self.hi = float(lo), float(hi)
        c = net.out_dim
        if fixed_x is not None:
            self.x = fixed_x.detach().flatten(1).clone().to(dev)
            m = self.x.shape[0]
            labels = fixed_labels if fixed_labels is not None else torch.arange(m) % 2
            self.labels = labels.to(dev)
        else:
            m = hp.n_candidates
            self.labels = (torch.arange(m) % (2 if c == 1 else c)).to(dev)
            self.x = (torch.randn(m, net.input_dim, generator=generator) * hp.init_std).to(dev)
            self.x.requires_grad_()
        self.free = [] if fixed_x is not None else [self.x]
        n_mult = 1 if c == 1 else c
        self.mask = torch.ones(m, n_mult, device=dev)
        if c > 1:
            self.mask[torch.arange(m), self.labels] = 0.0
        self.lam = torch.rand(m, n_mult, generator=generator).to(dev).requires_grad_()
        self.lambda_scale = 1.0
        if hp.multiplier_scale == "fit":
            self.lambda_scale = self._fit_lambda_scale()
        else:
            self.lambda_scale = 1.0 / m
        self.kkt_weight = (
            sum(float((t.detach() ** 2).sum()) for t in self.theta)
            if hp.residual == "absolute"
            else 1.0
        )

    def lam_eff(self) -> torch.Tensor:
        return torch.relu(self.lam) * self.mask * self.lambda_scale

    def candidates(self) -> torch.Tensor:
        return self.x.detach().clamp(self.lo, self.hi)

    def _coefficients(self) -> torch.Tensor:
        lam = self.lam_eff()
        if self.net.out_dim == 1:
            return lam * (2.0 * self.labels.view(-1, 1).to(lam.dtype) - 1.0)
        own = torch.zeros_like(lam).scatter(1, self.labels.view(-1, 1), lam.sum(1, keepdim=True))
        return own - lam

    def combination(self) -> list[torch.Tensor]:
        """sum_k coef_k . grad_theta Phi(theta; x_k), differentiable in x and lambda."""
        out = self.net.forward(self.x, self.theta, self.hp.relu_alpha)
        s = (self._coefficients() * out).sum()
        return list(torch.autograd.grad(s, self.theta, create_graph=True))

    def _fit_lambda_scale(self) -> float:
        """Least-squares scale of the initial combination, so multipliers start at O(1)."""
        g = self.combination()
        num = sum(float((p.detach() * q.detach()).sum()) for p, q in zip(self.theta, g))
        den = sum(float((q.detach() ** 2).sum()) for q in g)
        return abs(num) / den if den > 0 and num != 0 else 1.0

    def losses(self) -> tuple[torch.Tensor, torch.Tensor]:
        kkt = self.target.residual(self.combination())
        bounds = (torch.relu(self.x - self.hi) ** 2 + torch.relu(self.lo - self.x) ** 2).sum()
        lam_pen = (torch.relu(self.hp.lambda_min - self.lam) ** 2 * self.mask).sum()
        penalties = self.hp.bound_weight * bounds + self.hp.lambda_weight * lam_pen
        total = self.kkt_weight * kkt + penalties
        return total, kkt

    def optimise(self, progress: Progress | None) -> list[dict[str, float]]:
        hp = self.hp
        groups = [
            {"params": self.free, "lr": hp.lr_x},
            {"params": [self.lam, *self.target.parameters()], "lr": hp.lr_lambda},
        ]
        opt: torch.optim.Optimizer
        if hp.optimizer == "sgd":
            opt = torch.optim.SGD(groups, momentum=hp.momentum)
        else:
            opt = torch.optim.Adam(groups)
        sched = (
            torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(hp.steps, 1))
            if hp.lr_schedule == "cosine"
            else None
        )
        variables = [*self.free, self.lam, *self.target.parameters()]
        trace: list[dict[str, float]] = []
        for step in range(hp.steps + 1):
            total, kkt = self.losses()
            if step % hp.log_every == 0 or step == hp.steps:
                trace.append({"step": float(step), "loss": total.item(), "kkt": kkt.item()})
                report_every(progress, "kkt reconstruction", step, hp.steps, 1)
            if step == hp.steps:
                break
            opt.zero_grad(set_to_none=True)
            total.backward(inputs=variables)
            opt.step()
            if sched is not None:
                sched.step()
        return trace
