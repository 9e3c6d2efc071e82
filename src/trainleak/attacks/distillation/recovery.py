"""Recovery of training images from a released distilled set (IRA step 5): the synthetic
images themselves, as candidates for the private images they started from.

A real-initialised set begins as copies of private images and its optimisation moves them
only so far, so each synthetic image is a candidate reconstruction of its source. The attack
returns the synthetic images with a ground-truth-free confidence: minus the distance of each
to its nearest auxiliary image, relative to the auxiliary data's own nearest-neighbour
distance (a synthetic image that looks like a natural image is more likely a near-copy).

Before that it can undo part of what the optimisation did to every image of a class
(``restore``), using only the release and the auxiliary data. Distribution matching, for one,
moves a whole class towards the real class mean in embedding space, and much of that move is
one image-space shift per class that also washes out contrast and background (on MNIST, DM at
10 ipc from real images: a per-class common part of norm 1.9 in a per-image change of norm
3.4). ``"histogram"`` maps each image's pixel values, channel by channel, onto the auxiliary
class's pixel distribution by rank (histogram matching), which restores the intensities and
keeps each image's own spatial structure; ``"shift"`` first subtracts the class's synthetic
mean minus the auxiliary class mean (a real-initialised class starts as real images, so this
estimates the common shift, with the sampling error of a mean of ``ipc`` images). Measured
(best SSIM to each initialisation image, mean / share >= 0.9): on that MNIST set none
0.47 / 0.00, histogram 0.79 / 0.15, shift+histogram 0.81 / 0.21, against 0.63 / 0.01 for 10
random auxiliary images per class; on the 8x8 digits with few distillation steps, where the
images barely moved, none 0.96 / 0.96 (DM), histogram 0.94 / 0.87, shift+histogram
0.90 / 0.58, and MTT none 0.87 / 0.33, histogram 0.89 / 0.58. Histogram matching is the
default: large gains where the distiller moved the images, small losses where it did not;
the shift helps only when the common move dominates the sampling error of the class mean.
[inferred] design, ours.

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
        restore: ``"none"`` (the synthetic images as released), ``"histogram"`` (each
            image histogram-matched to the auxiliary class's pixel values), ``"shift"``
            (minus each class's common shift) or ``"shift+histogram"`` (both).
    """

    name: ClassVar[str] = "ira-recovery"
    summary: ClassVar[str] = (
        "Recovery from a distilled set: the synthetic images as reconstructions of the "
        "private images they started from, scored by distance to auxiliary data"
    )
    release_type: ClassVar[type[DistilledSet]] = DistilledSet
    requires: ClassVar[frozenset[str]] = frozenset({"auxiliary"})

    aux_eval: int = param(500, ge=2, integer=True)
    restore: str = param("histogram", choices=("none", "shift", "histogram", "shift+histogram"))

    def run(
        self,
        release: DistilledSet,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        aux_x, aux_y = auxiliary(knowledge, release)
        ax = aux_x[: self.aux_eval].flatten(1).double()
        syn = restore_images(
            release.images.float(), release.hard_labels, aux_x, aux_y, self.restore
        ).clamp(*release.value_range)
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


def restore_images(
    syn: torch.Tensor,
    labels: torch.Tensor,
    aux_x: torch.Tensor,
    aux_y: torch.Tensor,
    mode: str,
) -> torch.Tensor:
    """Undo the class-common part of a distillation (see the module docstring).

    Args:
        syn: synthetic images ``(m, C, H, W)``.
        labels: their hard labels.
        aux_x: auxiliary images of the same distribution; ``aux_y`` their labels.
        mode: ``"none"``, ``"shift"``, ``"histogram"`` or ``"shift+histogram"``.

    Returns:
        The restored images (same shape); classes without auxiliary images are left as they
        are.
    """
    if mode == "none":
        return syn.clone()
    out = syn.clone()
    for c in labels.unique().tolist():
        mine, ref = labels == c, aux_x[aux_y == c].float()
        if len(ref) == 0:
            continue
        block = syn[mine]
        if mode in ("shift", "shift+histogram"):
            block = block - (block.mean(0) - ref.mean(0))
        if mode in ("histogram", "shift+histogram"):
            block = _match_histograms(block, ref)
        out[mine] = block
    return out


def _match_histograms(images: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Each image's values, channel by channel, replaced by the quantiles of ``ref``'s values
    of that channel at the same ranks."""
    out = torch.empty_like(images)
    for ch in range(images.shape[1]):
        q = torch.sort(ref[:, ch].flatten()).values
        vals = images[:, ch].flatten(1)
        pos = torch.linspace(0, len(q) - 1, vals.shape[1]).round().long()
        order = torch.argsort(vals, dim=1)
        matched = torch.empty_like(vals)
        matched.scatter_(1, order, q[pos].expand_as(vals).contiguous())
        out[:, ch] = matched.view_as(images[:, ch])
    return out
