"""Membership inference against a released distilled set (IRA step 4).

Three scores, each "higher means member", for the candidate records in
``Knowledge.candidates``:

* ``ira-membership-nn``: minus the distance to the nearest synthetic image of the same class.
  Most distillation methods start from real images and stay close to them, so the records a
  real-initialised set started from are exposed (Zhao and Zhang 2025).
* ``ira-membership-loss``: minus the cross-entropy of a white-box surrogate: the revealed
  architecture trained on the release (the "black box to white box" step).
* ``ira-membership-lira``: offline LiRA (Carlini et al. 2022) with shadow surrogates trained on
  the shadow bank's sets of the revealed algorithm and architecture, which never saw the
  candidates: the surrogate's logit-scaled confidence minus its mean over the shadow
  surrogates, divided by their pooled standard deviation (fixed variance, as with few shadows).

References:
    Chen et al., "Turning Black Box into White Box: Dataset Distillation Leaks", arXiv
    2603.01053, 2026.
    Carlini, Chien, Nasr, Song, Terzis and Tramer, "Membership Inference Attacks From First
    Principles", IEEE S&P 2022.
    Zhao and Zhang, arXiv 2502.12976, 2025 (membership and initialisation leakage in dataset
    distillation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.distillation._common import (
    architectures,
    auxiliary,
    checked_bank,
    spec_key,
    tensor_hash,
    train_surrogate,
)
from trainleak.attacks.distillation.reveal import InformationRevelation
from trainleak.errors import ConfigError
from trainleak.models.spec import ModelSpec
from trainleak.progress import Progress
from trainleak.releases.distilled import DistilledSet, ShadowSet
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param

_CONFIDENCE_CACHE: dict[str, torch.Tensor] = {}


def candidates(knowledge: Knowledge, release: DistilledSet) -> tuple[torch.Tensor, torch.Tensor]:
    """The candidate records, checked against the release."""
    if knowledge.candidates is None:
        raise ConfigError.invalid("candidates", "records (x, y) to score", None)
    x, y = knowledge.candidates
    if tuple(x.shape[1:]) != release.input_shape or y.shape != (x.shape[0],):
        raise ConfigError.invalid(
            "candidates",
            f"(x, y) with x (n, {', '.join(map(str, release.input_shape))}) and y (n,)",
            (tuple(x.shape), tuple(y.shape)),
        )
    return x.float(), y


def logit_confidence(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log p_y - log(1 - p_y) of each record, computed from the logits (stable)."""
    with torch.no_grad():
        z = net(x).double()
    zy = z.gather(1, y[:, None]).squeeze(1)
    others = z.scatter(1, y[:, None], float("-inf")).logsumexp(1)
    return zy - others


@register_attack
@dataclass(frozen=True, kw_only=True)
class NearestSyntheticMembership(Attack[DistilledSet]):
    """Membership by closeness to a synthetic image, calibrated with auxiliary data.

    For candidate ``x`` the score is max_j log(a_j / d(x, s_j)): ``d`` is the Euclidean
    distance to synthetic image ``s_j`` and ``a_j`` the distance from ``s_j`` to its nearest
    auxiliary image (known non-members), so a record counts as close only when it is closer to
    some synthetic image than any auxiliary record is. [inferred] The calibration is ours: it
    makes the score comparable across synthetic images that sit in dense and in sparse parts
    of the data; ``calibrate=False`` gives minus the plain nearest distance.

    Args:
        same_class: compare only with synthetic (and auxiliary) images of the same label.
        calibrate: divide by the auxiliary nearest-neighbour distance of each synthetic image.
        aux_eval: auxiliary images used for the calibration.
    """

    name: ClassVar[str] = "ira-membership-nn"
    summary: ClassVar[str] = (
        "Membership in a distilled set's source data: closeness of a record to a synthetic "
        "image, relative to the closest auxiliary record (initialisation leakage)"
    )
    release_type: ClassVar[type[DistilledSet]] = DistilledSet
    requires: ClassVar[frozenset[str]] = frozenset({"candidates", "auxiliary"})

    same_class: bool = param(True, choices=(True, False))
    calibrate: bool = param(True, choices=(True, False))
    aux_eval: int = param(2000, ge=1, integer=True)

    def run(
        self,
        release: DistilledSet,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        x, y = candidates(knowledge, release)
        syn, syn_y = release.images.flatten(1).double(), release.hard_labels
        dist = self._masked(torch.cdist(x.flatten(1).double(), syn), y, syn_y)
        if not self.calibrate:
            best = dist.min(1).values
            score = -torch.where(torch.isfinite(best), best, torch.full_like(best, 1e6))
            return Reconstruction(inputs=x, labels=y, scores=score.float())
        ax, ay = auxiliary(knowledge, release)
        ax, ay = ax[: self.aux_eval].flatten(1).double(), ay[: self.aux_eval]
        to_aux = self._masked(torch.cdist(ax, syn), ay, syn_y).min(0).values
        finite = torch.isfinite(to_aux)
        fill = to_aux[finite].max() if bool(finite.any()) else torch.tensor(1.0).double()
        ref = torch.where(finite, to_aux, fill)
        ratio = ref.clamp_min(1e-12).log()[None, :] - dist.clamp_min(1e-12).log()
        score = ratio.max(1).values
        score = torch.where(torch.isfinite(score), score, torch.full_like(score, -1e6))
        return Reconstruction(inputs=x, labels=y, scores=score.float())

    def _masked(self, dist: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        if not self.same_class:
            return dist
        return dist.masked_fill(rows[:, None] != cols[None, :], float("inf"))

    def expected_shape(self, release: DistilledSet, knowledge: Knowledge) -> tuple[int, ...]:
        return release.input_shape


@dataclass(frozen=True, kw_only=True)
class _SurrogateAttack(InformationRevelation):
    """A membership attack through a surrogate of the revealed architecture.

    Args:
        architecture: the architecture kind to use; ``None`` reveals it from the shadow bank.
        surrogate_steps: training steps of each surrogate.
        surrogate_lr: their learning rate (unless the set publishes one).
        surrogates: surrogates trained on the release (different initialisations).
    """

    architecture: str | None = None
    surrogate_steps: int = param(300, ge=1, integer=True)
    surrogate_lr: float = param(0.1, gt=0)
    surrogates: int = param(1, ge=1, integer=True)

    def run(
        self,
        release: DistilledSet,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        x, y = candidates(knowledge, release)
        choice = self._choice(release, knowledge)
        score, extra = self._score(release, knowledge, choice, x, y)
        diag: dict[str, Any] = {"algorithm": choice[0], "architecture": choice[1].kind, **extra}
        return Reconstruction(inputs=x, labels=y, scores=score.float(), diagnostics=diag)

    def _score(
        self,
        release: DistilledSet,
        knowledge: Knowledge,
        choice: tuple[str, ModelSpec],
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Membership scores of the candidates ``x, y`` and extra diagnostics, given the
        surrogates' (algorithm, architecture spec)."""
        raise NotImplementedError

    def _choice(self, release: DistilledSet, knowledge: Knowledge) -> tuple[str, ModelSpec]:
        """The (algorithm, architecture spec) of the surrogates: revealed, or the architecture
        given (then the algorithm is reported as ``"unknown"``)."""
        specs = architectures(knowledge, release)
        if self.architecture is not None:
            if self.architecture not in specs:
                raise ConfigError.invalid(
                    "architecture", f"one of {sorted(specs)}", self.architecture
                )
            checked_bank(knowledge, release)
            return "unknown", specs[self.architecture]
        rev = self.reveal(release, knowledge)
        return rev.algorithm, specs[rev.architecture]

    def _confidences(
        self, release: DistilledSet, spec: ModelSpec, x: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        """Mean logit-scaled confidence over the release's surrogates (memoised: a pure
        function of the set, the architecture, the settings and the candidates)."""
        key = "|".join(
            (release.content_hash(), spec_key([spec]), tensor_hash(x, y), repr(self._sur()))
        )
        hit = _CONFIDENCE_CACHE.get(key)
        if hit is not None:
            return hit.clone()
        outs = []
        for i in range(self.surrogates):
            net = train_surrogate(
                release, spec, steps=self.surrogate_steps, lr=self.surrogate_lr, seed=i
            )
            outs.append(logit_confidence(net, x, y))
        out = torch.stack(outs).mean(0)
        if len(_CONFIDENCE_CACHE) >= 4096:
            _CONFIDENCE_CACHE.clear()
        _CONFIDENCE_CACHE[key] = out
        return out.clone()

    def _sur(self) -> tuple[int, float, int]:
        return (self.surrogate_steps, self.surrogate_lr, self.surrogates)

    def expected_shape(self, release: DistilledSet, knowledge: Knowledge) -> tuple[int, ...]:
        return release.input_shape


@register_attack
@dataclass(frozen=True, kw_only=True)
class LossMembership(_SurrogateAttack):
    """Membership by the white-box surrogate's confidence (equivalently, minus its loss)."""

    name: ClassVar[str] = "ira-membership-loss"
    summary: ClassVar[str] = (
        "Membership in a distilled set's source data: the confidence of a surrogate of the "
        "revealed architecture trained on the set"
    )

    def _score(
        self,
        release: DistilledSet,
        knowledge: Knowledge,
        choice: tuple[str, ModelSpec],
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        return self._confidences(release, choice[1], x, y), {}


@register_attack
@dataclass(frozen=True, kw_only=True)
class LiRAMembership(_SurrogateAttack):
    """Offline LiRA with shadow surrogates trained on the shadow bank's sets.

    Args:
        shadows: at most this many shadow sets (those of the revealed algorithm and
            architecture first, then the revealed architecture, then any).
    """

    name: ClassVar[str] = "ira-membership-lira"
    summary: ClassVar[str] = (
        "Membership in a distilled set's source data: offline LiRA, the surrogate's confidence "
        "against shadow surrogates trained on shadow distilled sets"
    )

    shadows: int = param(8, ge=2, integer=True)

    def _shadow_sets(
        self, knowledge: Knowledge, release: DistilledSet, algo: str, kind: str
    ) -> list[ShadowSet]:
        sets = checked_bank(knowledge, release).sets

        def rank(s: ShadowSet) -> int:
            return (
                0
                if (s.algorithm, s.architecture) == (algo, kind)
                else int(s.architecture != kind) + 1
            )

        order = sorted(range(len(sets)), key=lambda i: (rank(sets[i]), i))
        return [sets[i] for i in order[: self.shadows]]

    def _score(
        self,
        release: DistilledSet,
        knowledge: Knowledge,
        choice: tuple[str, ModelSpec],
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        algorithm, spec = choice
        target = self._confidences(release, spec, x, y)
        sets = self._shadow_sets(knowledge, release, algorithm, spec.kind)
        outs = torch.stack([self._confidences(s.release, spec, x, y) for s in sets])
        mu = outs.mean(0)
        sigma = (outs - mu).std().clamp_min(1e-6) if len(sets) > 1 else torch.tensor(1.0)
        return (target - mu) / sigma, {"shadow_surrogates": len(sets)}
