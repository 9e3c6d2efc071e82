"""Release-time defenses for Data Collaboration: Gaussian noise on one channel of the uploads.

- :class:`PrivateNoise` (``sigma``) perturbs the private representations ``X~_i``: the anchor
  channel still reveals ``Q_i`` exactly, so leakage is ``X_i + E_i Q_i^T``, at a utility cost.
- :class:`AnchorNoise` (``tau``) perturbs only the anchor representations ``A~_i``: the
  private uploads stay noiseless, so alignment keeps utility while the anchor-based inversion
  of ``Q_i`` degrades (the proposal of seed system 7 [summary]).

Isotropic Gaussian noise commutes with the secret rotation, so adding it to the upload equals
adding it before the transform.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from trainleak.errors import ReleaseTypeError
from trainleak.releases.collaboration import SharedRepresentations, Upload
from trainleak.validation import check_fields, param


def _check(release: object) -> SharedRepresentations:
    if not isinstance(release, SharedRepresentations):
        raise ReleaseTypeError(
            f"this defense transforms SharedRepresentations, received {type(release).__name__}"
        )
    return release


@dataclass(frozen=True)
class PrivateNoise:
    """Add ``N(0, sigma^2)`` to every private upload entry."""

    sigma: float = param(ge=0)

    def __post_init__(self) -> None:
        check_fields(self)

    def __call__(
        self, release: SharedRepresentations, generator: torch.Generator
    ) -> SharedRepresentations:
        rel = _check(release)
        ups = tuple(
            replace(
                u,
                private=u.private
                + self.sigma
                * torch.randn(u.private.shape, generator=generator, dtype=u.private.dtype),
            )
            for u in rel.uploads
        )
        return SharedRepresentations(ups)

    def __repr__(self) -> str:
        return f"PrivateNoise(sigma={self.sigma})"


@dataclass(frozen=True)
class AnchorNoise:
    """Add ``N(0, tau^2)`` to every anchor upload entry (private uploads untouched)."""

    tau: float = param(ge=0)

    def __post_init__(self) -> None:
        check_fields(self)

    def __call__(
        self, release: SharedRepresentations, generator: torch.Generator
    ) -> SharedRepresentations:
        rel = _check(release)
        ups: tuple[Upload, ...] = tuple(
            replace(
                u,
                anchor=u.anchor
                + self.tau * torch.randn(u.anchor.shape, generator=generator, dtype=u.anchor.dtype),
            )
            for u in rel.uploads
        )
        return SharedRepresentations(ups)

    def __repr__(self) -> str:
        return f"AnchorNoise(tau={self.tau})"
