"""Learned inversion of the hidden states a split language model's server receives.

* :class:`LearnedInverter` (``split-lm-inverter``): train a hidden-state-to-token network on
  public text passed through the public bottom, then decode every received row (the learning-
  based attack of SplitLLM/BiSR, Chen et al. 2024, arXiv 2409.00960; and of Song and Raghunathan,
  "Information leakage in embedding models", CCS 2020).
* :class:`AdaptiveInverter` (``split-lm-adaptive-inverter``): the adversary knows the client's
  defense algorithm (the transcript's public :class:`TextDefenseSpec`) but not its secrets, and
  trains the inverter on its public text obfuscated by that algorithm with its own random
  secrets (mixed representations for mixup and MIXGUARD, noised ones for the noise defense),
  reading channel magnitudes instead of values when the defense flips channel signs with a
  secret mask, which leaves magnitudes unchanged (Carlini et al., IEEE S&P 2021, on InstaHide).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.split_lm._common import inverter_logits
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_text import TextSplitTranscript
from trainleak.validation import param


@register_attack
@dataclass(frozen=True, kw_only=True)
class LearnedInverter(Attack[TextSplitTranscript]):
    """Decode received hidden states with an inverter trained on public text."""

    name: ClassVar[str] = "split-lm-inverter"
    summary: ClassVar[str] = (
        "Split LM: hidden-state-to-token inverter trained on public text through the public bottom"
    )
    release_type: ClassVar[type[TextSplitTranscript]] = TextSplitTranscript
    requires: ClassVar[frozenset[str]] = frozenset({"prior"})
    adaptive: ClassVar[bool] = False

    steps: int = param(600, ge=1, integer=True)
    lr: float = param(3e-3, gt=0)
    batch_size: int = param(256, ge=1, integer=True)
    width: int = param(256, ge=1, integer=True)
    random_share: float = param(1.0, ge=0)
    sign_invariant: bool = False

    def expected_shape(self, release: TextSplitTranscript, knowledge: Knowledge) -> tuple[int]:
        return (int(release.mask.shape[1]),)

    def run(
        self,
        release: TextSplitTranscript,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        _, logits, n_train = inverter_logits(
            release,
            knowledge,
            adaptive=self.adaptive,
            random_share=self.random_share,
            steps=self.steps,
            lr=self.lr,
            batch_size=self.batch_size,
            width=self.width,
            gen=generator,
            sign_invariant=self.sign_invariant,
        )
        probs = logits.softmax(-1)
        conf, tokens = probs.max(-1)
        return Reconstruction(
            inputs=tokens,
            scores=(conf * release.mask).sum(1) / release.mask.sum(1).clamp_min(1),
            diagnostics={
                "adaptive": self.adaptive,
                "sign_invariant": self.sign_invariant,
                "train_tokens": int(n_train),
            },
        )


@register_attack
@dataclass(frozen=True, kw_only=True)
class AdaptiveInverter(LearnedInverter):
    """The inverter trained on public text obfuscated by the transcript's defense algorithm;
    under a secret sign mask it reads channel magnitudes (``sign_invariant``, on by default)."""

    name: ClassVar[str] = "split-lm-adaptive-inverter"
    summary: ClassVar[str] = (
        "Split LM: inverter trained on public text through the client's defense algorithm "
        "with the adversary's own secrets (adaptive)"
    )
    adaptive: ClassVar[bool] = True
    sign_invariant: bool = True
