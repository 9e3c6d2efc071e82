"""BiSR-style refinement (Chen et al. 2024, "Unveiling the Vulnerability of Private Fine-Tuning
in Split-Based Frameworks for Large Language Models: A Bidirectionally Enhanced Attack", CCS
2024, arXiv 2409.00960): start from a learned inverter's token distribution and refine relaxed
tokens so that the public bottom's output matches the observed forward hidden states.

The relaxed tokens are logits over the vocabulary; their softmax times the public embedding
table is fed to the public bottom, and the squared distance to each received row is minimised
together with a pull towards the inverter's logits (the learned prior). Only the forward signal
is matched: the backward gradients in the transcript are gradients of the client's private top
and labels, which the server cannot simulate without them (see docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.split_lm._common import (
    embedding_table,
    fit_inverter,
    public_bottom,
    public_ids,
    training_pairs,
)
from trainleak.models.language import embedding
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_text import TextSplitTranscript
from trainleak.validation import param


@register_attack
@dataclass(frozen=True, kw_only=True)
class BiSRRefinement(Attack[TextSplitTranscript]):
    """Inverter initialisation, then forward-activation matching through the public bottom."""

    name: ClassVar[str] = "split-lm-bisr"
    summary: ClassVar[str] = (
        "Split LM: BiSR-style refinement of a (defense-adaptive) inverter's output by matching "
        "the observed forward hidden states through the public bottom"
    )
    release_type: ClassVar[type[TextSplitTranscript]] = TextSplitTranscript
    requires: ClassVar[frozenset[str]] = frozenset({"prior"})

    inverter_steps: int = param(600, ge=1, integer=True)
    refine_steps: int = param(60, ge=0, integer=True)
    lr: float = param(0.1, gt=0)
    prior_weight: float = param(0.1, ge=0)
    width: int = param(256, ge=1, integer=True)
    random_share: float = param(1.0, ge=0)
    adaptive: bool = True

    def expected_shape(self, release: TextSplitTranscript, knowledge: Knowledge) -> tuple[int]:
        return (int(release.mask.shape[1]),)

    def run(
        self,
        release: TextSplitTranscript,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        model = public_bottom(release)
        ids = public_ids(knowledge, release)
        pairs = training_pairs(
            model, ids, release.defense, self.adaptive, generator, self.random_share
        )
        inv = fit_inverter(
            pairs, embedding_table(release), self.inverter_steps, 3e-3, 256, self.width, generator
        )
        with torch.no_grad():
            init = inv(release.smashed).log_softmax(-1)
        logits, match = self._refine(model, release, init)
        return Reconstruction(
            inputs=logits.argmax(-1),
            scores=-match,
            diagnostics={"adaptive": self.adaptive, "final_match": float(match.mean())},
        )

    def _refine(
        self, model: object, release: TextSplitTranscript, init: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        table = embedding(release.public_lm).weight.detach()  # type: ignore[union-attr]
        target, mask = release.smashed, release.mask
        keep = mask.unsqueeze(-1).float()
        z = init.clone().requires_grad_(True)
        opt = torch.optim.Adam([z], lr=self.lr)
        scale = target.pow(2).mul(keep).sum() / keep.sum()
        bottom = model.bottom_embeds  # type: ignore[attr-defined]
        for _ in range(self.refine_steps):
            h = bottom(z.softmax(-1) @ table, mask)
            fwd = ((h - target).pow(2) * keep).sum() / keep.sum() / scale
            prior = -(init.exp() * z.log_softmax(-1)).sum(-1).mul(mask).sum() / mask.sum()
            loss = fwd + self.prior_weight * prior
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        with torch.no_grad():
            hard = bottom(table[z.argmax(-1)], mask)
            match = ((hard - target).pow(2) * keep).sum((1, 2)) / keep.sum((1, 2))
        return z.detach(), match
