"""The malicious client of federated unlearning (seed system 6): it probes a live server.

The client submits probe messages to an :class:`ExactUnlearningServer` and reverts them; the
probe plans and the identification math it relies on are the attack's
(:mod:`trainleak.attacks.unlearning.probing`). This module is the glue between the system and
the attack, so it lives in the scenarios layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from trainleak.attacks.unlearning.probing import (
    ProbeKind,
    plan_own_batches,
    plan_unrestricted,
    response_rank,
)
from trainleak.errors import ConfigError
from trainleak.systems.unlearning.server import ExactUnlearningServer
from trainleak.validation import check_fields, param


@dataclass
class ProbingClient:
    """A client that probes a server until its responses identify the state, then reverts.

    Args:
        name: the client's name on the server.
        kind: ``"unrestricted"`` or ``"own_data"``.
        own_phi: own records' features (n x d), for own-data probes.
        own_labels: their labels (n,).
        batch: records per own-data probe.
        scale: size of unrestricted probes.
        seed: seed of the probe plan.
        patience: stop own-data probing when the rank has not grown for this many batches.
    """

    name: str
    kind: ProbeKind = param(choices=ProbeKind)
    own_phi: np.ndarray | None = None
    own_labels: np.ndarray | None = None
    batch: int = 10
    scale: float = 1.0
    seed: int = 0
    patience: int = 2

    def __post_init__(self) -> None:
        check_fields(self)
        if self.kind == "own_data" and (self.own_phi is None or self.own_labels is None):
            raise ConfigError.invalid("own_phi", "own records for own-data probes", None)

    def probe(
        self,
        server: ExactUnlearningServer,
        revert: bool = True,
        between: Callable[[], None] | None = None,
    ) -> int:
        """Submit probes (own data: until the observed rank reaches ``d``); return the count.

        Args:
            server: the server to probe.
            revert: undo the probes afterwards (retract summaries, delete own records).
            between: called after every own message (simulates concurrent honest activity).
        """
        tick = between or (lambda: None)
        if self.kind == "unrestricted":
            ids = []
            for m in plan_unrestricted(
                server.dim, server.n_classes, scale=self.scale, seed=self.seed
            ):
                ids.append(server.submit(self.name, m))
                tick()
            if revert:
                for sid in ids:
                    server.retract(self.name, sid)
                    tick()
            return len(ids)
        if self.own_phi is None or self.own_labels is None:
            raise ConfigError.invalid("own_phi", "own records for own-data probes", None)
        base = server.events[-1].head
        diffs: list[np.ndarray] = []
        added: list[int] = []
        ranks: list[int] = []
        for idx in plan_own_batches(self.own_labels, self.batch, seed=self.seed):
            added += server.add(
                self.name,
                torch.from_numpy(self.own_phi[idx]),
                torch.from_numpy(self.own_labels[idx]),
            )
            diffs.append(server.events[-1].head - base)
            tick()
            ranks.append(response_rank(np.concatenate(diffs, axis=1)))
            if ranks[-1] >= server.dim or (
                len(ranks) > self.patience and ranks[-1] == ranks[-1 - self.patience]
            ):
                break  # identified, or the own data stopped adding directions
        if revert:
            server.delete(self.name, added)
        return len(diffs)
