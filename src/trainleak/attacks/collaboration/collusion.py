"""Collusion attacks on Data Collaboration: the analyst plus one or more participants (seed 7).

- :class:`AnchorInversionAttack` (exact): with the anchor disclosed and the centred anchor of
  full column rank, ``Q_i = pinv(A_bar) A~_i^c`` exactly, ``t_i`` from the means, and
  ``X_i = (X~_i - 1 t_i^T) Q_i^{-1}``: float64-exact in the noiseless case [inferred; exact].
- :class:`AnchorProcrustesAttack`: ``Q_i = polar(A_bar^T A~_i^c)``, the maximum-likelihood
  rotation under Gaussian anchor noise; works with any anchor rank.
- :class:`PivotAttack`: uses the analyst's own alignment. If alignment works,
  ``Q_i G_i ~ Q_j G_j``; the colluders know their rows and aligned rows, fit the map from the
  collaborative space back to raw space, and apply it to everyone. Pools several colluders.

References:
    Giannella, Liu, Kargupta, *Breaching Euclidean distance-preserving data perturbation using
    few known inputs*, arXiv 0911.2942; Imakura & Sakurai, arXiv 1902.07535; seed system 7
    (trainleak's seed briefs, section 7; attack set [inferred]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.collaboration._common import (
    centred_anchor,
    disclosures,
    targets,
)
from trainleak.linalg import polar, procrustes_affine
from trainleak.progress import Progress
from trainleak.releases.collaboration import SharedRepresentations
from trainleak.releases.collaboration_alignment import AlignMethod, align
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param

Fit = Literal["procrustes", "linear"]


def _result(rows: list[np.ndarray], parties: list[int], **diagnostics: object) -> Reconstruction:
    owner = [p for p, x in zip(parties, rows) for _ in range(x.shape[0])]
    return Reconstruction(
        inputs=torch.from_numpy(np.concatenate(rows, axis=0)),
        diagnostics={"parties": parties, "row_party": owner, **diagnostics},
    )


class _CollusionAttack(Attack[SharedRepresentations]):
    """Base of the colluding-analyst attacks: one reconstructed row of ``dim`` features each."""

    release_type: ClassVar[type[SharedRepresentations]] = SharedRepresentations

    def expected_shape(
        self, release: SharedRepresentations, knowledge: Knowledge
    ) -> tuple[int, ...]:
        return (release.dim,)


class _AnchorAttack(_CollusionAttack):
    requires: ClassVar[frozenset[str]] = frozenset({"disclosures"})
    full_rank: ClassVar[bool] = False

    def rotation(self, centred: np.ndarray, upload_centred: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def run(
        self,
        release: SharedRepresentations,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        found = disclosures(knowledge, release, need_anchor=True)
        anchor = next(d.anchor for d in found if d.anchor is not None)
        if anchor is None:
            raise RuntimeError("internal invariant violated: anchor is not None")
        centred, mu = centred_anchor(anchor.numpy(), require_full_rank=self.full_rank)
        rows, parties = [], targets(release, found)
        for i in parties:
            up = release.uploads[i]
            a = up.anchor.numpy()
            Q = self.rotation(centred, a - a.mean(0))
            t = a.mean(0) - mu @ Q
            rows.append((up.private.numpy() - t) @ np.linalg.pinv(Q))
        return _result(rows, parties, anchor_rank=int(np.linalg.matrix_rank(centred)))


@register_attack
@dataclass(frozen=True, kw_only=True)
class AnchorInversionAttack(_AnchorAttack):
    """Exact transform recovery from a disclosed, full-column-rank centred anchor.

    Args:
        rcond: relative cutoff of the pseudo-inverse of the centred anchor.

    Raises:
        ShapeError: (at call time) the centred anchor has rank below ``m``.
    """

    name: ClassVar[str] = "dc-anchor-inversion"
    summary: ClassVar[str] = "exact Q_i = pinv(A_bar) A~_i from a disclosed full-rank anchor"
    full_rank: ClassVar[bool] = True
    rcond: float = param(1e-12, gt=0, lt=1)

    def rotation(self, centred: np.ndarray, upload_centred: np.ndarray) -> np.ndarray:
        return np.asarray(np.linalg.pinv(centred, rcond=self.rcond) @ upload_centred)


@register_attack
@dataclass(frozen=True, kw_only=True)
class AnchorProcrustesAttack(_AnchorAttack):
    """Known-anchor orthogonal Procrustes: ``Q_i = polar(A_bar^T A~_i^c)``.

    Args:
        rcond: unused by the polar factor; kept for a uniform interface with the inversion.
    """

    name: ClassVar[str] = "dc-anchor-procrustes"
    summary: ClassVar[str] = "known-anchor orthogonal Procrustes estimate of each Q_i"
    rcond: float = param(1e-12, gt=0, lt=1)

    def rotation(self, centred: np.ndarray, upload_centred: np.ndarray) -> np.ndarray:
        return polar(centred.T @ upload_centred)


@register_attack
@dataclass(frozen=True, kw_only=True)
class PivotAttack(_CollusionAttack):
    """Map the analyst's collaborative representation back to raw space via the colluders.

    Args:
        alignment: the analyst's alignment method
            (see :func:`trainleak.systems.collaboration.align`).
        power_iters: power iterations of the spectral GOPP alignment.
        fit: ``"procrustes"`` (orthogonal map plus shift) or ``"linear"`` (least-squares affine
            map; needs at least ``m + 1`` colluder rows).
    """

    name: ClassVar[str] = "dc-pivot"
    summary: ClassVar[str] = "pivot through the colluders' own aligned rows (no anchor needed)"
    release_type: ClassVar[type[SharedRepresentations]] = SharedRepresentations
    requires: ClassVar[frozenset[str]] = frozenset({"disclosures"})

    alignment: AlignMethod = param("gopp_spectral", choices=AlignMethod)
    power_iters: int = param(0, ge=0)
    fit: Fit = param("procrustes", choices=Fit)

    def run(
        self,
        release: SharedRepresentations,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        found = disclosures(knowledge, release, need_anchor=False)
        al = align(release, self.alignment, power_iters=self.power_iters)
        src = np.concatenate([al.aligned[d.party] for d in found])
        dst = np.concatenate([d.private.numpy() for d in found])
        if self.fit == "procrustes":
            R, s = procrustes_affine(src, dst)
        else:
            ones = np.ones((src.shape[0], 1))
            coef = np.linalg.lstsq(np.hstack([src, ones]), dst, rcond=None)[0]
            R, s = coef[:-1], coef[-1]
        parties = targets(release, found)
        rows = [al.aligned[i] @ R + s for i in parties]
        return _result(rows, parties, colluder_rows=int(src.shape[0]))
