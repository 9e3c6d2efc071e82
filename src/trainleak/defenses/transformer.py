"""Release-time Gaussian noise for transformer updates, relative to each tensor's RMS.

``RelativeNoise(sigma)`` adds ``N(0, (sigma * rms(g))^2)`` to every entry of each gradient
tensor ``g``, so ``sigma`` is a per-tensor noise-to-signal ratio (``1e-3`` leaves each layer's
gradient 1000 times stronger than the noise per entry). DP-SGD, which needs per-sample
gradients, is a client option
(:func:`trainleak.systems.transformer_clients.dpsgd_transformer_update`).

References:
    Zhu, Liu, Han, *Deep Leakage from Gradients*, NeurIPS 2019, Sec. 5 (noise as a defense);
    Petrov et al., *DAGER*, NeurIPS 2024, Sec. 6 (Gaussian noise on transformer gradients).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from trainleak.errors import ReleaseTypeError
from trainleak.releases.base import Release
from trainleak.releases.transformer_update import TransformerUpdate
from trainleak.validation import check_fields, param


@dataclass(frozen=True)
class RelativeNoise:
    """Gaussian noise at ``sigma`` times each tensor's root-mean-square value."""

    sigma: float = param(ge=0)

    def __post_init__(self) -> None:
        check_fields(self)

    def __call__(self, release: Release, generator: torch.Generator) -> TransformerUpdate:
        if not isinstance(release, TransformerUpdate):
            raise ReleaseTypeError(
                f"RelativeNoise transforms a TransformerUpdate, received {type(release).__name__}"
            )
        new = {}
        for k, v in release.update.items():
            rms = float(v.double().pow(2).mean().sqrt())
            new[k] = v + self.sigma * rms * torch.randn(v.shape, generator=generator, dtype=v.dtype)
        return dataclasses.replace(release, update=new)
