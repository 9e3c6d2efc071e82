"""Shared pieces of the collusion attacks: reading disclosures, fixtures."""

from __future__ import annotations

import numpy as np

from trainleak.errors import MissingKnowledgeError, ShapeError
from trainleak.releases.collaboration import Disclosure, SharedRepresentations
from trainleak.releases.knowledge import Knowledge


def disclosures(
    knowledge: Knowledge, release: SharedRepresentations, *, need_anchor: bool
) -> tuple[Disclosure, ...]:
    """The colluders' disclosures from ``knowledge.disclosures``."""
    found = knowledge.disclosures
    if not found:
        raise MissingKnowledgeError(
            "collusion attacks need Knowledge(disclosures=(Disclosure, ...)) "
            "from at least one colluding participant"
        )
    out = tuple(found)
    for d in out:
        if not isinstance(d, Disclosure) or not 0 <= d.party < release.n_parties:
            raise MissingKnowledgeError(f"disclosure {d!r} is not a Disclosure of a participant")
    if need_anchor and all(d.anchor is None for d in out):
        raise MissingKnowledgeError("this attack needs a colluder who discloses the anchor X_anc")
    return out


def centred_anchor(anchor: np.ndarray, *, require_full_rank: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(X_anc - 1 mu^T, mu)``; raise when exactness needs full column rank and it fails."""
    mu = anchor.mean(0)
    centred = anchor - mu
    if require_full_rank:
        r, m = anchor.shape
        rank = int(np.linalg.matrix_rank(centred))
        if rank < m:
            raise ShapeError(
                f"the centred anchor has rank {rank} < m = {m} (anchor has {r} rows; exact "
                f"recovery needs full column rank, so at least m + 1 = {m + 1} rows in general "
                "position); use the Procrustes or pivot attack instead"
            )
    return centred, mu


def targets(release: SharedRepresentations, found: tuple[Disclosure, ...]) -> list[int]:
    """Participants that are not colluding."""
    colluders = {d.party for d in found}
    return [i for i in range(release.n_parties) if i not in colluders]
