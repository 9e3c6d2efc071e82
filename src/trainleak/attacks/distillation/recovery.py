"""Recovery of training images from a released distilled set (IRA step 5): the synthetic
images themselves, as candidates for the private images they started from.

A real-initialised set begins as copies of private images and its optimisation moves them
only so far, so each synthetic image is a candidate reconstruction of its source. The attack
returns the synthetic images with a ground-truth-free confidence: minus the distance of each
to its nearest auxiliary image, relative to the auxiliary data's own nearest-neighbour
distance (a synthetic image that looks like a natural image is more likely a near-copy).

References:
    Chen et al., "Turning Black Box into White Box: Dataset Distillation Leaks", arXiv
    2603.01053, 2026 (recovery; the nearest-synthetic reading is [inferred]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.distillation._common import auxiliary
from trainleak.progress import Progress
from trainleak.releases.distilled import DistilledSet
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param


@register_attack
@dataclass(frozen=True, kw_only=True)
class NearestSyntheticRecovery(Attack[DistilledSet]):
    """Return the synthetic images as reconstructions, scored by closeness to natural images.

    Args:
        aux_eval: auxiliary images used for the confidence score.
    """

    name: ClassVar[str] = "ira-recovery"
    summary: ClassVar[str] = (
        "Recovery from a distilled set: the synthetic images as reconstructions of the "
        "private images they started from, scored by distance to auxiliary data"
    )
    release_type: ClassVar[type[DistilledSet]] = DistilledSet
    requires: ClassVar[frozenset[str]] = frozenset({"auxiliary"})

    aux_eval: int = param(500, ge=2, integer=True)

    def run(
        self,
        release: DistilledSet,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        ax = auxiliary(knowledge, release)[0][: self.aux_eval].flatten(1).double()
        syn = release.images.float()
        to_aux = torch.cdist(syn.flatten(1).double(), ax).min(1).values
        within = torch.cdist(ax, ax) + torch.eye(len(ax), dtype=ax.dtype) * 1e12
        scale = within.min(1).values.median().clamp_min(1e-12)
        return Reconstruction(
            inputs=syn.clone(),
            labels=release.hard_labels.clone(),
            scores=(-to_aux / scale).float(),
            diagnostics={"aux_nn_median": float(scale)},
        )

    def expected_shape(self, release: DistilledSet, knowledge: Knowledge) -> tuple[int, ...]:
        return release.input_shape
