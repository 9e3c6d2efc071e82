"""White-box optimisation attack on the head: find inputs whose head output matches each
transmitted smashed row (He et al.'s regularised maximum-likelihood inversion).

Each row is inverted by Adam on a box-constrained input (a sigmoid parametrisation),
minimising ``||f_h(x) - s||^2 / ||s||^2 + tv * TV(x)``, started from the auxiliary mean (or
mid-range without auxiliary data).

Adaptive (``adaptive=True``), knowing the public defense: the clipping is part of the forward
map (``f_h(x) * min(1, C / ||f_h(x)||)``, to which the zero-mean noise adds nothing in
expectation), input-side clipping is applied to the candidate, and rows that MDAV made
identical within a step are inverted jointly: one candidate per member, whose mapped outputs
must average to the centroid, each started from a different auxiliary image, namely those
whose defended outputs lie nearest to the centroid (the defense applied to the adversary's
own data).

References:
    He, Zhang and Lee, "Model inversion attacks against collaborative inference", ACSAC 2019
    (white-box rMLE attack).
    Zaland, Mistry and Bhuyan, arXiv 2602.17614, 2026 (KD-UFSL, the defense adapted to).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.split_learning._common import defend, known_head, value_box
from trainleak.defenses.split_learning import clip_and_noise
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_learning import SplitTranscript
from trainleak.validation import param


def _tv(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 4:
        return x.new_zeros(len(x))
    dh = (x[:, :, 1:] - x[:, :, :-1]).abs().mean((1, 2, 3))
    dw = (x[:, :, :, 1:] - x[:, :, :, :-1]).abs().mean((1, 2, 3))
    return dh + dw


def _logit(x: torch.Tensor, box: tuple[float, float]) -> torch.Tensor:
    lo, hi = box
    p = ((x - lo) / (hi - lo)).clamp(1e-3, 1 - 1e-3)
    return torch.log(p / (1 - p))


def _groups(release: SplitTranscript) -> torch.Tensor:
    """``(N,)`` ids of the sets of identical rows within each step (MDAV groups)."""
    ids = torch.empty(len(release), dtype=torch.int64)
    offset = 0
    for _, rows in release.batches():
        _, inv = torch.unique(release.smashed[rows].reshape(len(rows), -1), dim=0, return_inverse=True)
        ids[rows] = inv + offset
        offset += int(inv.max()) + 1
    return ids


@register_attack
@dataclass(frozen=True, kw_only=True)
class WhiteBoxHeadInversion(Attack[SplitTranscript]):
    """Optimise inputs so that the known head reproduces each transmitted row.

    Args:
        steps: Adam steps.
        lr: Adam learning rate (on the logits of the input).
        tv: total-variation weight.
        adaptive: model the public defense (clipping in the forward map, joint inversion
            of MDAV groups started from the nearest defended auxiliary images).
        chunk: rows optimised together (memory only).
    """

    name: ClassVar[str] = "split-whitebox"
    summary: ClassVar[str] = (
        "Split learning: white-box optimisation of inputs through the known aggregated head "
        "to match each smashed row (optionally defense-adaptive)"
    )
    release_type: ClassVar[type[SplitTranscript]] = SplitTranscript
    requires: ClassVar[frozenset[str]] = frozenset({"value_range"})

    steps: int = param(300, ge=1, integer=True)
    lr: float = param(0.1, gt=0)
    tv: float = param(0.01, ge=0)
    adaptive: bool = False
    chunk: int = param(512, ge=1, integer=True)

    def expected_shape(self, release: SplitTranscript, knowledge: Knowledge) -> tuple[int, ...]:
        return tuple(release.split.input_shape)

    def _forward(self, head: nn.Module, x: torch.Tensor, release: SplitTranscript) -> torch.Tensor:
        spec = release.defense
        if not self.adaptive or spec is None or spec.clip is None:
            return head(x)  # type: ignore[no-any-return]
        if spec.where == "input":
            return head(clip_and_noise(x, spec.clip, 0.0, torch.Generator()))  # type: ignore[no-any-return]
        return clip_and_noise(head(x), spec.clip, 0.0, torch.Generator())

    def _init(
        self,
        release: SplitTranscript,
        knowledge: Knowledge,
        head: nn.Module,
        groups: torch.Tensor,
        generator: torch.Generator,
    ) -> torch.Tensor:
        box = value_box(knowledge)
        shape = (len(release), *release.split.input_shape)
        prior = knowledge.prior
        if prior is None or tuple(prior.shape[1:]) != tuple(release.split.input_shape):
            return torch.full(shape, (box[0] + box[1]) / 2)
        prior = prior.float()
        if not self.adaptive:
            return prior.mean(0, keepdim=True).expand(shape).clone()
        with torch.no_grad():
            s_aux = defend(release, head, prior, generator, adaptive=True).reshape(len(prior), -1)
        x0 = torch.empty(shape)
        target = release.smashed.reshape(len(release), -1).float()
        for gid in groups.unique():
            rows = torch.nonzero(groups == gid).flatten()
            near = torch.cdist(target[rows[:1]], s_aux)[0].argsort()[: len(rows)]
            x0[rows] = prior[near[torch.arange(len(rows)) % len(near)]]
        return x0

    def run(
        self,
        release: SplitTranscript,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        head = known_head(release, "round")
        box = value_box(knowledge)
        groups = _groups(release) if self.adaptive else torch.arange(len(release))
        x0 = self._init(release, knowledge, head, groups, generator)
        out = torch.empty_like(x0)
        target = release.smashed.float()
        for part in torch.arange(int(groups.max()) + 1).split(self.chunk):
            rows = torch.nonzero(torch.isin(groups, part)).flatten()
            out[rows] = self._invert(head, release, x0[rows], target[rows], groups[rows], box)
        return Reconstruction(inputs=out, diagnostics={"adaptive": self.adaptive})

    def _invert(
        self,
        head: nn.Module,
        release: SplitTranscript,
        x0: torch.Tensor,
        target: torch.Tensor,
        groups: torch.Tensor,
        box: tuple[float, float],
    ) -> torch.Tensor:
        lo, hi = box
        z = _logit(x0, box).requires_grad_(True)
        opt = torch.optim.Adam([z], lr=self.lr)
        _, inv = torch.unique(groups, return_inverse=True)
        n_g = int(inv.max()) + 1
        counts = torch.bincount(inv, minlength=n_g).float()
        flat_t = target.reshape(len(target), -1)
        t_norm = flat_t.pow(2).sum(1).clamp_min(1e-12)
        for _ in range(self.steps):
            x = lo + (hi - lo) * torch.sigmoid(z)
            f = self._forward(head, x, release).reshape(len(x), -1)
            mean = torch.zeros(n_g, f.shape[1]).index_add(0, inv, f) / counts[:, None]
            loss = ((mean[inv] - flat_t).pow(2).sum(1) / t_norm + self.tv * _tv(x)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (lo + (hi - lo) * torch.sigmoid(z)).detach()
