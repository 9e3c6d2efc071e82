"""The Data Collaboration release: what each participant uploads to the analyst (seed 7).

Participant ``i`` holds private rows ``X_i`` (n_i x m) and the common anchor ``X_anc`` (r x m),
draws a secret orthogonal ``Q_i`` and translation ``t_i``, and uploads
``X~_i = X_i Q_i + 1 t_i^T`` and ``A~_i = X_anc Q_i + 1 t_i^T`` with its labels. The anchor
itself is withheld from the analyst.

References:
    Imakura & Sakurai, *Data collaboration analysis framework using centralization of
    individual intermediate representations*, arXiv 1902.07535; Nosaka et al., orthonormal
    Data Collaboration, arXiv 2403.02780.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainleak.errors import ShapeError
from trainleak.releases.base import Release


@dataclass(frozen=True)
class Upload:
    """One participant's upload.

    Attributes:
        private: ``X~_i``, shape ``(n_i, m)``.
        anchor: ``A~_i``, shape ``(r, m)``.
        labels: labels of the private rows ``(n_i,)``.
    """

    private: torch.Tensor
    anchor: torch.Tensor
    labels: torch.Tensor


@dataclass(frozen=True)
class Disclosure:
    """What a colluding participant hands the analyst.

    Attributes:
        party: the colluder's index.
        private: its true private rows ``X_j``.
        rotation: its secret ``Q_j``.
        translation: its secret ``t_j``.
        anchor: the common anchor ``X_anc`` (``None`` when withheld).
    """

    party: int
    private: torch.Tensor
    rotation: torch.Tensor
    translation: torch.Tensor
    anchor: torch.Tensor | None


@dataclass(frozen=True)
class SharedRepresentations(Release):
    """All uploads the analyst receives.

    Attributes:
        uploads: one :class:`Upload` per participant.
    """

    uploads: tuple[Upload, ...]

    def __post_init__(self) -> None:
        if not self.uploads:
            raise ShapeError("SharedRepresentations needs at least one upload")
        r, m = self.uploads[0].anchor.shape
        for i, u in enumerate(self.uploads):
            if tuple(u.anchor.shape) != (r, m) or u.private.ndim != 2 or u.private.shape[1] != m:
                raise ShapeError(
                    f"participant {i} uploaded private {tuple(u.private.shape)} and anchor "
                    f"{tuple(u.anchor.shape)}; every participant must upload (n_i, {m}) and "
                    f"({r}, {m}) like participant 0"
                )
            if u.labels.shape != (u.private.shape[0],):
                raise ShapeError(
                    f"participant {i}: labels {tuple(u.labels.shape)} do not match "
                    f"{u.private.shape[0]} rows"
                )

    @property
    def dim(self) -> int:
        """Representation dimension ``m``."""
        return int(self.uploads[0].anchor.shape[1])

    @property
    def n_parties(self) -> int:
        """Number of participants."""
        return len(self.uploads)

    def describe(self) -> str:
        r = self.uploads[0].anchor.shape[0]
        return f"SharedRepresentations({self.n_parties} parties, m={self.dim}, anchor rows={r})"
