"""Inverse-network attacks on a split-learning transcript: learn to map smashed data back to
inputs on the adversary's auxiliary data, then decode every transmitted row.

* :class:`InverseNetworkAttack` (``split-inverse-network``): the server knows the aggregated
  head (FedAvg broadcasts it) and trains the decoder on ``(f_h(x_aux), x_aux)`` (He et al.'s
  black-box inverse network, with the head made white-box by aggregation).
* :class:`SubstituteHeadAttack` (``split-fora``): the head is unknown; the adversary trains a
  substitute head of the public architecture so that its outputs on auxiliary data match the
  distribution of the transcript's smashed data (multi-kernel MMD), then trains the decoder
  through the substitute (FORA).

With ``adaptive=True`` both apply the transcript's public defense (noise, MDAV in batches of
the clients' size) to their own auxiliary smashed data, so the decoder learns to invert
defended rows (a centroid decodes to its group's expected input).

References:
    He, Zhang and Lee, "Model inversion attacks against collaborative inference", ACSAC 2019.
    Xu, Zhang, Wang, Li, Li and Xie, "A Stealthy Wolf in Sheep's Clothing: Feature-Oriented
    Reconstruction Attack (FORA) on Split Learning", CVPR 2024.
    Zaland, Mistry and Bhuyan, arXiv 2602.17614, 2026 (the seed's inversion-network attack).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.split_learning._common import (
    decode,
    defend,
    known_head,
    prior_images,
    train_decoder,
    value_box,
)
from trainleak.attacks.split_learning._substitute import fit_substitute
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_learning import SplitTranscript
from trainleak.validation import param

HeadChoice = Literal["round", "final"]


@dataclass(frozen=True, kw_only=True)
class _DecoderAttack(Attack[SplitTranscript]):
    release_type: ClassVar[type[SplitTranscript]] = SplitTranscript
    requires: ClassVar[frozenset[str]] = frozenset({"prior"})

    steps: int = param(400, ge=1, integer=True)
    lr: float = param(2e-3, gt=0)
    batch_size: int = param(64, ge=1, integer=True)
    width: int = param(32, ge=1, integer=True)
    adaptive: bool = False

    def expected_shape(self, release: SplitTranscript, knowledge: Knowledge) -> tuple[int, ...]:
        return tuple(release.split.input_shape)

    def _decode_all(
        self,
        release: SplitTranscript,
        knowledge: Knowledge,
        head: torch.nn.Module,
        generator: torch.Generator,
    ) -> Reconstruction:
        x_aux = prior_images(knowledge, release)
        with torch.no_grad():
            s_aux = defend(release, head, x_aux, generator, adaptive=self.adaptive)
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
        dec = train_decoder(
            s_aux,
            x_aux,
            width=self.width,
            steps=self.steps,
            lr=self.lr,
            batch_size=self.batch_size,
            box=value_box(knowledge),
            seed=seed,
        )
        with torch.no_grad():
            fit = float(((decode(dec, s_aux) - x_aux) ** 2).mean())
        return Reconstruction(
            inputs=decode(dec, release.smashed.float()),
            diagnostics={"aux_fit_mse": fit, "adaptive": self.adaptive},
        )


@register_attack
@dataclass(frozen=True, kw_only=True)
class InverseNetworkAttack(_DecoderAttack):
    """Decoder trained on auxiliary data through the known aggregated head.

    Args:
        steps, lr, batch_size, width: the decoder's training.
        adaptive: apply the public defense to the auxiliary smashed data.
        head: the aggregate of the last recorded round's start (``"round"``) or the final one.
    """

    name: ClassVar[str] = "split-inverse-network"
    summary: ClassVar[str] = (
        "Split learning: inverse network trained on auxiliary data through the known "
        "aggregated head, applied to every smashed row (optionally defense-adaptive)"
    )
    head: HeadChoice = param("round", choices=("round", "final"))

    def run(
        self,
        release: SplitTranscript,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        return self._decode_all(release, knowledge, known_head(release, self.head), generator)


@register_attack
@dataclass(frozen=True, kw_only=True)
class SubstituteHeadAttack(_DecoderAttack):
    """FORA-style: a substitute head (public architecture, unknown weights) fitted so its
    auxiliary outputs match the transcript's smashed distribution (multi-kernel MMD), then a
    decoder trained through it.

    Args:
        substitute_steps, substitute_lr: the substitute's fitting.
        steps, lr, batch_size, width: the decoder's training.
        adaptive: apply the public defense to the substitute's outputs (both fits).
    """

    name: ClassVar[str] = "split-fora"
    summary: ClassVar[str] = (
        "Split learning with an unknown head (FORA): substitute head matched to the smashed "
        "distribution by MMD, then an inverse network through it (optionally adaptive)"
    )
    substitute_steps: int = param(300, ge=1, integer=True)
    substitute_lr: float = param(1e-3, gt=0)

    def run(
        self,
        release: SplitTranscript,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        head = fit_substitute(
            release,
            prior_images(knowledge, release),
            steps=self.substitute_steps,
            lr=self.substitute_lr,
            batch_size=self.batch_size,
            adaptive=self.adaptive,
            generator=generator,
        )
        rec = self._decode_all(release, knowledge, head, generator)
        return rec
