"""Differentiable siamese augmentation (DSA): random affine transforms that gradients flow
through, with the same draw applied to the real and the synthetic batch of a class.

One transform (scale, rotation, translation, optional horizontal flip and brightness) is drawn
per call and applied to the whole batch by ``affine_grid``/``grid_sample``, so it is
differentiable in the images. Dataset condensation applies the *same* draw to the real and the
synthetic batch it compares ("siamese"); use :meth:`DiffAugment.sample` once and
:meth:`DiffAugment.apply` on both.

References:
    Zhao and Bilen, "Dataset Condensation with Differentiable Siamese Augmentation", ICML 2021.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from trainleak.validation import check_fields, param


@dataclass(frozen=True)
class AugmentDraw:
    """One drawn transform: a ``(1, 2, 3)`` affine matrix and a brightness shift."""

    theta: torch.Tensor
    brightness: float


@dataclass(frozen=True)
class DiffAugment:
    """Random differentiable affine augmentation.

    Args:
        scale: relative scale drawn from ``[1 - scale, 1 + scale]``.
        rotate_deg: rotation drawn from ``[-rotate_deg, rotate_deg]`` degrees.
        translate: shift drawn from ``[-translate, translate]`` of the image side.
        flip: flip horizontally with probability 1/2 (off for digits).
        brightness: additive shift drawn from ``[-brightness, brightness]``.

    Example:
        >>> aug = DiffAugment()
        >>> x = torch.rand(3, 1, 8, 8, requires_grad=True)
        >>> aug(x, torch.Generator().manual_seed(0)).sum().backward()
        >>> x.grad is not None
        True
    """

    scale: float = param(0.2, ge=0, lt=1)
    rotate_deg: float = param(15.0, ge=0, le=180)
    translate: float = param(0.125, ge=0, le=0.5)
    flip: bool = False
    brightness: float = param(0.0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)

    def sample(self, generator: torch.Generator) -> AugmentDraw:
        """Draw one transform."""
        dev = generator.device
        u = torch.rand(6, generator=generator, dtype=torch.float64, device=dev).tolist()
        s = 1.0 + self.scale * (2 * u[0] - 1)
        a = math.radians(self.rotate_deg * (2 * u[1] - 1))
        tx, ty = (self.translate * 2 * (2 * v - 1) for v in u[2:4])
        f = -1.0 if self.flip and u[4] < 0.5 else 1.0
        theta = torch.tensor(
            [
                [f * math.cos(a) / s, -math.sin(a) / s, tx],
                [f * math.sin(a) / s, math.cos(a) / s, ty],
            ]
        )
        return AugmentDraw(theta.unsqueeze(0), self.brightness * (2 * u[5] - 1))

    @staticmethod
    def apply(x: torch.Tensor, draw: AugmentDraw) -> torch.Tensor:
        """Apply ``draw`` to every image of ``x`` ``(n, C, H, W)`` (differentiable in ``x``)."""
        theta = draw.theta.to(x).expand(x.shape[0], 2, 3)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        out = F.grid_sample(x, grid, padding_mode="border", align_corners=False)
        return out + draw.brightness if draw.brightness else out

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Draw one transform and apply it to the batch."""
        return self.apply(x, self.sample(generator))
