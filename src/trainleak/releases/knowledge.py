"""What the adversary knows besides the release: :class:`Knowledge`, with typed fields.

An attack declares the fields it needs in ``requires``; the attack contract refuses to run
without them (:meth:`Knowledge.require`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from trainleak.errors import MissingKnowledgeError
from trainleak.models.spec import ModelSpec
from trainleak.releases.classifier import GenerativePrior
from trainleak.releases.collaboration import Disclosure
from trainleak.releases.distilled import ShadowBank


@dataclass(frozen=True)
class Knowledge:
    """What the adversary knows besides the release. ``None`` means "not known".

    Attributes:
        input_shape: shape of one input, e.g. ``(1, 28, 28)``.
        value_range: the box the inputs live in, e.g. ``(-1.0, 1.0)``.
        label_set: the possible labels, e.g. ``(0, 1)`` or ``tuple(range(10))``.
        labels: the labels of the records to reconstruct, when known.
        n_records: the (approximate) number of training records.
        prior: samples from the data distribution (N, *input_shape), e.g. public data.
        other_records: the records other than the target ``(x, y)`` (informed adversary).
        active: whether the adversary may choose the model (a malicious server).
        disclosures: what colluding participants hand over (Data Collaboration), one
            :class:`~trainleak.releases.collaboration.Disclosure` each.
        subspace_basis: an orthonormal ``(d, s)`` basis of a subspace known to hold the
            records (informed attacks on private regression).
        record_norm: a known bound on the records' Euclidean norm.
        candidate_algorithms: the distillation algorithms a released synthetic set may come
            from (e.g. ``("dc", "dm", "mtt")``).
        candidate_architectures: the architectures it may have been distilled with, one
            :class:`ModelSpec` each, built for the task's input shape and class count.
        auxiliary: labelled data ``(x, y)`` from the same distribution as the private set,
            disjoint from it.
        shadow_bank: the adversary's own distilled sets, labelled by algorithm and
            architecture, distilled from the auxiliary data only.
        candidates: the records ``(x, y)`` whose membership a membership attack scores.
        candidate_texts: the texts whose membership a language-model membership attack scores
            (an unlabelled pool of members and non-members).
        generative_prior: a decoder trained on public data of other classes (model
            inversion); see :class:`~trainleak.releases.classifier.GenerativePrior`.
    """

    input_shape: tuple[int, ...] | None = None
    value_range: tuple[float, float] | None = None
    label_set: tuple[int, ...] | None = None
    labels: torch.Tensor | None = None
    n_records: int | None = None
    prior: torch.Tensor | None = None
    other_records: tuple[torch.Tensor, torch.Tensor] | None = None
    active: bool = False
    disclosures: tuple[Disclosure, ...] | None = None
    subspace_basis: torch.Tensor | None = None
    record_norm: float | None = None
    candidate_algorithms: tuple[str, ...] | None = None
    candidate_architectures: tuple[ModelSpec, ...] | None = None
    auxiliary: tuple[torch.Tensor, torch.Tensor] | None = None
    shadow_bank: ShadowBank | None = None
    candidates: tuple[torch.Tensor, torch.Tensor] | None = None
    candidate_texts: tuple[str, ...] | None = None
    generative_prior: GenerativePrior | None = None

    def require(self, names: frozenset[str] | set[str], *, who: str) -> None:
        """Raise :class:`MissingKnowledgeError` naming every required field that is unknown."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown_fields = sorted(n for n in names if n not in known)
        if unknown_fields:
            raise MissingKnowledgeError(f"{who} requires unknown knowledge fields {unknown_fields}")
        missing = sorted(n for n in names if _is_missing(getattr(self, n)))
        if missing:
            raise MissingKnowledgeError(
                f"{who} needs the adversary to know {missing}, but Knowledge has them unset; "
                f"pass e.g. Knowledge({missing[0]}=...)"
            )


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool):
        return not value
    return isinstance(value, tuple) and not value
