"""An exact federated-unlearning server for a ridge head on frozen features (seed system 6).

The server keeps two additive sufficient statistics of frozen, public features ``phi(x)``:
``A = sum phi phi^T + lam I`` (d x d) and ``B = sum phi y^T`` (d x c, one-hot ``y``). Clients send
additions and deletions; after every accepted change the server broadcasts the head
``W = A^{-1} B``, which equals retraining from scratch on the current records (exact
unlearning), rounded to the broadcast precision.

References:
    Quan, Wu, Montana, *Exact Federated Continual Unlearning for Ridge Heads on Frozen
    Foundation Models*, arXiv 2603.12977 (2026): additive statistics, fixed-size add/delete
    messages, rebroadcast equal to retraining.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import cho_solve

from trainleak.errors import ConfigError, ShapeError, TrainleakError
from trainleak.releases.unlearning import BroadcastLog, EventKind, SummaryMessage
from trainleak.validation import check_positive

_PRECISIONS = ("float64", "float32", "float16")


class SingularStatisticsError(TrainleakError, ValueError):
    """The server's Gram matrix is not positive definite, so no unique head exists."""


class IllConditionedWarning(RuntimeWarning):
    """The server's Gram matrix is so ill-conditioned that the broadcast head is inaccurate."""


def check_precision(precision: str) -> None:
    """Raise :class:`ConfigError` unless ``precision`` is a known broadcast precision."""
    if precision in _PRECISIONS or re.fullmatch(r"decimals:\d{1,2}", precision):
        return
    raise ConfigError.invalid(
        "precision", "'float64', 'float32', 'float16' or 'decimals:k' (k = 0..99)", precision
    )


def quantize_head(W: np.ndarray, precision: str) -> np.ndarray:
    """Round ``W`` to the broadcast ``precision``; the result is float64 holding those values.

    Args:
        W: the exact head.
        precision: ``"float64"``, ``"float32"``, ``"float16"`` or ``"decimals:k"`` (round to
            ``k`` decimal places).

    Returns:
        The published values.
    """
    check_precision(precision)
    if precision.startswith("decimals:"):
        return np.round(W, int(precision.split(":")[1]))
    return W.astype(precision).astype(np.float64)


@dataclass
class _Event:
    kind: EventKind
    client: str
    message: SummaryMessage | None
    head: np.ndarray


class ExactUnlearningServer:
    """Holds ``A`` and ``B``, accepts additions and deletions, broadcasts ``A^{-1} B``.

    Args:
        dim: feature dimension ``d``.
        n_classes: number of classes ``c`` (one-hot targets).
        lam: ridge regulariser ``lambda`` (> 0 keeps ``A`` positive definite).
        precision: broadcast precision (see :func:`quantize_head`).
        cond_warn: warn with :class:`IllConditionedWarning` above this condition number.

    Raises:
        ConfigError: a parameter is out of range.

    Example:
        >>> import torch
        >>> server = ExactUnlearningServer(dim=3, n_classes=2, lam=1.0)
        >>> ids = server.add("alice", torch.eye(3), torch.tensor([0, 1, 1]))
        >>> server.delete("alice", ids[:1])
        >>> len(server.log_for("alice").kinds)
        3
    """

    def __init__(
        self,
        *,
        dim: int,
        n_classes: int,
        lam: float = 1.0,
        precision: str = "float64",
        cond_warn: float = 1e12,
    ) -> None:
        if dim < 1 or n_classes < 2:
            raise ConfigError.invalid("dim, n_classes", "d >= 1 and c >= 2", (dim, n_classes))
        check_positive("lam", lam, allow_zero=True)
        check_precision(precision)
        self.dim, self.n_classes, self.lam, self.precision = dim, n_classes, lam, precision
        self.cond_warn = cond_warn
        self.A = lam * np.eye(dim)
        self.B = np.zeros((dim, n_classes))
        self._records: dict[int, tuple[str, np.ndarray, int]] = {}
        self._summaries: dict[int, tuple[str, SummaryMessage]] = {}
        self._next_id = 0
        self.events: list[_Event] = []
        self._broadcast("initial", "", None, allow_singular=True)

    # ---- client operations ------------------------------------------------------------------
    def add(self, client: str, phi: torch.Tensor, labels: torch.Tensor) -> list[int]:
        """Add records ``phi`` (r x d) with integer ``labels``; return their ids; broadcast."""
        phi64, labels = self._check_records(phi, labels)
        msg = SummaryMessage.records(torch.from_numpy(phi64), labels, self.n_classes)
        ids = list(range(self._next_id, self._next_id + phi64.shape[0]))
        self._next_id += len(ids)
        for i, row, lab in zip(ids, phi64, labels.tolist()):
            self._records[i] = (client, row, int(lab))
        self._apply(msg, "add", client)
        return ids

    def delete(self, client: str, ids: list[int]) -> None:
        """Delete this client's records ``ids`` (exact unlearning); broadcast.

        Raises:
            ConfigError: an id is unknown, was already deleted or belongs to another client.
        """
        bad = [i for i in ids if i not in self._records or self._records[i][0] != client]
        if bad or not ids:
            raise ConfigError.invalid(
                "ids", f"a non-empty list of record ids that client {client!r} holds", bad or ids
            )
        phi = torch.from_numpy(np.stack([self._records[i][1] for i in ids]))
        labels = torch.tensor([self._records[i][2] for i in ids])
        for i in ids:
            del self._records[i]
        self._apply(SummaryMessage.records(phi, labels, self.n_classes).negated(), "delete", client)

    def submit(self, client: str, message: SummaryMessage) -> int:
        """Accept a client-computed summary (the protocol cannot check it); return its id."""
        if message.dim != self.dim or message.dB.shape[1] != self.n_classes:
            raise ShapeError(
                f"message has d={message.dim}, c={message.dB.shape[1]}; the server holds "
                f"d={self.dim}, c={self.n_classes}"
            )
        sid = self._next_id
        self._next_id += 1
        self._summaries[sid] = (client, message)
        self._apply(message, "add", client)
        return sid

    def retract(self, client: str, summary_id: int) -> None:
        """Undo a summary this client submitted earlier."""
        entry = self._summaries.get(summary_id)
        if entry is None or entry[0] != client:
            raise ConfigError.invalid(
                "summary_id", f"the id of a summary client {client!r} submitted", summary_id
            )
        del self._summaries[summary_id]
        self._apply(entry[1].negated(), "delete", client)

    # ---- views ------------------------------------------------------------------------------
    def head(self) -> np.ndarray:
        """The exact (unrounded) current head ``A^{-1} B``."""
        return _solve_pd(self.A, self.B)

    def record_ids(self, client: str | None = None) -> list[int]:
        """Ids of the records held (of one client, when given)."""
        return [i for i, r in self._records.items() if client is None or r[0] == client]

    def record(self, record_id: int) -> tuple[np.ndarray, int]:
        """The features and label of a record the server holds."""
        _, phi, label = self._records[record_id]
        return phi, label

    def log_for(self, client: str) -> BroadcastLog:
        """The :class:`BroadcastLog` as ``client`` saw it (its own messages known)."""
        kinds: list[EventKind] = []
        own: list[SummaryMessage | None] = []
        for e in self.events:
            mine = e.client == client and e.kind != "initial"
            kinds.append("own" if mine else e.kind)
            own.append(e.message if mine else None)
        heads = torch.from_numpy(np.stack([e.head for e in self.events]))
        return BroadcastLog(heads, tuple(kinds), tuple(own), self.precision)

    # ---- internals --------------------------------------------------------------------------
    def _check_records(
        self, phi: torch.Tensor, labels: torch.Tensor
    ) -> tuple[np.ndarray, torch.Tensor]:
        if phi.ndim != 2 or phi.shape[1] != self.dim:
            raise ShapeError(
                f"added features must have shape (r, {self.dim}) (the server's feature "
                f"dimension), received {tuple(phi.shape)}"
            )
        if labels.shape != (phi.shape[0],):
            raise ShapeError(
                f"labels must have shape ({phi.shape[0]},), received {tuple(labels.shape)}"
            )
        if len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= self.n_classes):
            raise ConfigError.invalid(
                "labels", f"integers in [0, {self.n_classes})", labels.tolist()
            )
        return phi.detach().to(torch.float64).numpy().copy(), labels.long()

    def _apply(self, msg: SummaryMessage, kind: EventKind, client: str) -> None:
        dA, dB = msg.dA().numpy(), msg.dB.numpy()
        self.A += dA
        self.B += dB
        try:
            self._broadcast(kind, client, msg)
        except SingularStatisticsError:
            self.A -= dA
            self.B -= dB
            raise

    def _broadcast(
        self, kind: EventKind, client: str, msg: SummaryMessage | None, allow_singular: bool = False
    ) -> None:
        if allow_singular and self.lam == 0:
            head = np.zeros_like(self.B)
        else:
            head = _solve_pd(self.A, self.B, self.cond_warn)
        self.events.append(_Event(kind, client, msg, quantize_head(head, self.precision)))


def _solve_pd(A: np.ndarray, B: np.ndarray, cond_warn: float = 1e12) -> np.ndarray:
    """Solve ``A W = B`` for a symmetric positive definite ``A``, with clear failures."""
    try:
        L = np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        raise SingularStatisticsError(
            "the server's Gram matrix A = sum phi phi^T + lam I is not positive definite "
            "(lam = 0 with fewer independent records than features, or a message removed more "
            "than was added); the change was rejected"
        ) from None
    diag = np.diag(L)
    cond = float((diag.max() / diag.min()) ** 2)
    if cond > cond_warn:
        warnings.warn(
            f"the server's Gram matrix is ill-conditioned (condition number about {cond:.2e} > "
            f"{cond_warn:.0e}); the broadcast head is numerically inaccurate",
            IllConditionedWarning,
            stacklevel=3,
        )
    return np.asarray(cho_solve((L, True), B))
