"""BiSR-style refinement (Chen et al. 2024, "Unveiling the Vulnerability of Private Fine-Tuning
in Split-Based Frameworks for Large Language Models: A Bidirectionally Enhanced Attack", CCS
2024, arXiv 2409.00960): start from a learned inverter's token distribution and refine the
tokens so that the public bottom's output matches the observed forward hidden states.

The bottom is causal, so the hidden state at position ``j`` depends only on tokens ``<= j``:
the refinement decodes left to right, trying the inverter's ``top_k`` candidates at each
position after the tokens already chosen and keeping the one whose bottom output at ``j`` is
closest to the received row (a discrete search in place of BiSR's relaxed-token optimisation;
with an undefended transcript it reaches the exact tokens whenever they are among the
candidates). Only the forward signal is matched. The backward gradient at the trunk output is,
when the client's top reads that output itself (no defense, noise, mixup), a function of it
(which the server computed) and of the client's private top, head and labels (template
classes, not tokens as in BiSR's language-model fine-tuning), so it adds nothing about the
tokens; under MIXGUARD the calibrator also reads the client's clean states, and readers
trained on the true tokens find the gradient at slot chance there
(``benchmarks/split_llm_backward.py``, docs/decisions.md). Under a secret channel sign mask the
inverter and the matching read channel magnitudes (``sign_invariant``; the mask leaves them
unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.split_lm._common import features, inverter_logits
from trainleak.models.split_lm import SplitLM
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
    lr: float = param(3e-3, gt=0)
    width: int = param(256, ge=1, integer=True)
    random_share: float = param(1.0, ge=0)
    top_k: int = param(16, ge=1, integer=True)
    batch_size: int = param(256, ge=1, integer=True)
    adaptive: bool = True
    sign_invariant: bool = True

    def expected_shape(self, release: TextSplitTranscript, knowledge: Knowledge) -> tuple[int]:
        return (int(release.mask.shape[1]),)

    def run(
        self,
        release: TextSplitTranscript,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        model, logits, _ = inverter_logits(
            release,
            knowledge,
            adaptive=self.adaptive,
            random_share=self.random_share,
            steps=self.inverter_steps,
            lr=self.lr,
            batch_size=self.batch_size,
            width=self.width,
            gen=generator,
            sign_invariant=self.sign_invariant,
        )
        n_vocab = logits.shape[-1]
        with torch.no_grad():
            fold = partial(features, spec=release.defense, sign_invariant=self.sign_invariant)
            tokens, dist = _greedy_match(model, release, logits, min(self.top_k, n_vocab), fold)
        changed = float((tokens != logits.argmax(-1))[release.mask.bool()].float().mean())
        return Reconstruction(
            inputs=tokens,
            scores=-dist,
            diagnostics={
                "adaptive": self.adaptive,
                "sign_invariant": self.sign_invariant,
                "changed": changed,
                "final_match": float(dist.mean()),
            },
        )


def _greedy_match(
    model: SplitLM,
    release: TextSplitTranscript,
    logits: torch.Tensor,
    k: int,
    fold: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-to-right discrete forward matching over the top-``k`` candidates per position (in
    the space ``fold`` maps hidden states to: channel magnitudes under a secret sign mask);
    returns the tokens and each row's mean squared distance at its sent positions."""
    target, mask = fold(release.smashed), release.mask
    n, length = mask.shape
    cand = logits.topk(k, dim=-1).indices  # (n, L, k)
    tokens = cand[:, :, 0].clone()
    dist = torch.zeros(n)
    for j in range(length):
        rows = torch.nonzero(mask[:, j]).flatten()
        if not len(rows):
            continue
        prefix = tokens[rows, : j + 1].repeat_interleave(k, 0)
        prefix[:, j] = cand[rows, j].flatten()
        h = model.bottom(prefix, torch.ones_like(prefix))[:, j].reshape(len(rows), k, -1)
        err = (fold(h) - target[rows, j][:, None]).pow(2).mean(-1)
        best = err.argmin(1)
        tokens[rows, j] = cand[rows, j][torch.arange(len(rows)), best]
        dist[rows] += err[torch.arange(len(rows)), best]
    return tokens, dist / mask.sum(1).clamp_min(1)
