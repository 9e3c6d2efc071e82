"""Releases of unlearning services: an exact-unlearning server's broadcasts, and re-releases.

Two surfaces live here:

- :class:`BroadcastLog`: the sequence of ridge heads ``W_k = A_k^{-1} B_k`` that a federated
  unlearning server publishes after every accepted addition or deletion, as seen by one
  (possibly malicious) client. The client knows the messages it sent itself, so the log pairs
  each broadcast with the client's own message that triggered it (``None`` for someone else's
  change). Seed system 6; the server design follows Quan, Wu & Montana, *Exact Federated
  Continual Unlearning for Ridge Heads on Frozen Foundation Models*, arXiv 2603.12977.
- :class:`DeletionTranscript`: every output a curator published while honouring deletion
  requests under perfect retraining (seed system 16; Cohen, Kohen, Nissim & Stemmer,
  *Protecting the Undeleted in Machine Unlearning*, arXiv 2602.16697).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from trainleak.errors import ShapeError
from trainleak.releases.base import Release

EventKind = Literal["initial", "own", "add", "delete"]


@dataclass(frozen=True)
class SummaryMessage:
    """An additive change to the server's statistics: ``dA = F^T diag(w) F`` and ``dB``.

    The Gram change is kept as a low-rank factor so that a log of many probes in high
    dimension stays small. An addition of records ``Phi`` (r x d) with one-hot labels ``Y`` is
    ``F = Phi, w = +1, dB = Phi^T Y``; their deletion has ``w = -1`` and ``dB = -Phi^T Y``.

    Attributes:
        factor: ``F``, shape ``(r, d)`` (``r`` may be 0).
        weights: ``w``, shape ``(r,)``.
        dB: the change of the feature-label sums, shape ``(d, c)``.
    """

    factor: torch.Tensor
    weights: torch.Tensor
    dB: torch.Tensor  # noqa: N815 (the paper's symbol)

    def __post_init__(self) -> None:
        r, d = self.factor.shape
        if tuple(self.weights.shape) != (r,) or self.dB.ndim != 2 or self.dB.shape[0] != d:
            raise ShapeError(
                f"SummaryMessage expects factor (r, d), weights (r,), dB (d, c); received "
                f"{tuple(self.factor.shape)}, {tuple(self.weights.shape)}, {tuple(self.dB.shape)}"
            )

    @property
    def dim(self) -> int:
        """Feature dimension ``d``."""
        return int(self.factor.shape[1])

    def dA(self) -> torch.Tensor:
        """The dense Gram change ``F^T diag(w) F`` (d x d, float64)."""
        f = self.factor.to(torch.float64)
        return f.T @ (self.weights.to(torch.float64)[:, None] * f)

    def negated(self) -> SummaryMessage:
        """The message that undoes this one."""
        return SummaryMessage(self.factor, -self.weights, -self.dB)

    @classmethod
    def records(cls, phi: torch.Tensor, labels: torch.Tensor, n_classes: int) -> SummaryMessage:
        """The addition of records ``phi`` (r x d) with integer ``labels`` (r,)."""
        phi = phi.to(torch.float64)
        y = torch.nn.functional.one_hot(labels.long(), n_classes).to(torch.float64)
        return cls(phi, torch.ones(phi.shape[0], dtype=torch.float64), phi.T @ y)

    @classmethod
    def unrestricted(cls, dB: torch.Tensor) -> SummaryMessage:
        """A chosen change of the label sums only (``dA = 0``): an unrestricted probe."""
        d = dB.shape[0]
        empty = torch.zeros(0, d, dtype=torch.float64)
        return cls(empty, torch.zeros(0, dtype=torch.float64), dB.to(torch.float64))


@dataclass(frozen=True)
class BroadcastLog(Release):
    """The ridge heads an unlearning server broadcast, as one client saw them.

    Attributes:
        heads: the broadcast heads ``W_k``, shape ``(T, d, c)``, float64 holding the values as
            published (already rounded to ``precision``).
        kinds: per broadcast, what triggered it: ``"initial"``, ``"own"`` (this client's
            message), ``"add"`` or ``"delete"`` (another client's change; its content unknown).
        own: per broadcast, this client's message that triggered it, else ``None``.
        precision: the broadcast precision (``"float64"``, ``"float32"``, ``"float16"`` or
            ``"decimals:k"``).
    """

    heads: torch.Tensor
    kinds: tuple[EventKind, ...]
    own: tuple[SummaryMessage | None, ...]
    precision: str = "float64"

    def __post_init__(self) -> None:
        t = self.heads.shape[0]
        if self.heads.ndim != 3 or len(self.kinds) != t or len(self.own) != t:
            raise ShapeError(
                f"BroadcastLog expects heads (T, d, c) with T kinds and T own entries; received "
                f"heads {tuple(self.heads.shape)}, {len(self.kinds)} kinds, {len(self.own)} own"
            )

    @property
    def dim(self) -> int:
        """Feature dimension ``d``."""
        return int(self.heads.shape[1])

    @property
    def n_classes(self) -> int:
        """Number of outputs ``c``."""
        return int(self.heads.shape[2])

    def deletions(self) -> list[int]:
        """Indices of broadcasts that followed another client's deletion."""
        return [k for k, kind in enumerate(self.kinds) if kind == "delete"]

    def describe(self) -> str:
        n_own = sum(k == "own" for k in self.kinds)
        return (
            f"BroadcastLog({len(self.kinds)} heads of {self.dim}x{self.n_classes}, "
            f"{n_own} own messages, {len(self.deletions())} deletions, {self.precision})"
        )


@dataclass(frozen=True)
class DeletionTranscript(Release):
    """Everything a curator published while honouring deletion requests.

    Output ``k`` was computed on the data set after the first ``k`` deletions. For per-record
    mechanisms (randomized response) an output is a vector aligned with ``record_ids[k]``; for
    aggregate mechanisms (a sum, a model) it is one vector and ``record_ids[k]`` is ``None``.

    Attributes:
        outputs: the published outputs, in order.
        record_ids: per output, the ids of the records it covers (per-record mechanisms).
        adversary_ids: ids of the records the adversary inserted (it knows them).
        deleted: per output after the first, the ids whose deletion triggered it.
        mechanism: a description of the mechanism (e.g. ``"randomized_response(eps=1)"``).
    """

    outputs: tuple[torch.Tensor, ...]
    record_ids: tuple[torch.Tensor | None, ...]
    adversary_ids: torch.Tensor
    deleted: tuple[torch.Tensor, ...]
    mechanism: str = ""

    def __post_init__(self) -> None:
        n = len(self.outputs)
        if n == 0 or len(self.record_ids) != n or len(self.deleted) != n - 1:
            raise ShapeError(
                f"DeletionTranscript expects n >= 1 outputs, n record-id entries and n - 1 "
                f"deletions; received {n}, {len(self.record_ids)}, {len(self.deleted)}"
            )

    def describe(self) -> str:
        return f"DeletionTranscript({len(self.outputs)} outputs of {self.mechanism})"
