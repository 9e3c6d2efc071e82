"""Run the federated-unlearning protocol with one malicious client, and score its attack.

Used by the ``unlearning-broadcast-leak`` experiment and the benchmark: honest clients load the
server, then for every trial the malicious client probes (and reverts its probes), optional
concurrent honest additions land between its probes, and one honest record is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from trainleak.attacks.unlearning.broadcast import BroadcastDeletionAttack
from trainleak.attacks.unlearning.probing import ProbeKind, identify_before
from trainleak.metrics.vectors import abs_cosine, exact_rows, relative_error
from trainleak.releases.unlearning import SummaryMessage
from trainleak.scenarios.probing_client import ProbingClient
from trainleak.systems.unlearning.server import ExactUnlearningServer


@dataclass(frozen=True)
class ProtocolSetting:
    """One protocol run: data, probe type, precision and concurrent activity."""

    honest: tuple[np.ndarray, np.ndarray]
    own: tuple[np.ndarray, np.ndarray]
    reserve: tuple[np.ndarray, np.ndarray]
    kind: ProbeKind = "unrestricted"
    precision: str = "float64"
    deletions: int = 20
    concurrent: float = 0.0
    lam: float = 1.0
    batch: int = 10
    seed: int = 0
    n_classes: int = 10


@dataclass
class ProtocolOutcome:
    """Scores of one protocol run against the ground truth."""

    label_accuracy: float
    cosine: np.ndarray
    state_error: np.ndarray
    rank: np.ndarray
    probes: float
    certified: np.ndarray
    correct: np.ndarray
    reinsertion_error: float
    extras: dict[str, float] = field(default_factory=dict)


def run_protocol(s: ProtocolSetting) -> ProtocolOutcome:
    """Simulate the protocol for ``s`` and score :class:`BroadcastDeletionAttack` on its log."""
    rng = np.random.default_rng(s.seed)
    d = s.honest[0].shape[1]
    server = ExactUnlearningServer(dim=d, n_classes=s.n_classes, lam=s.lam, precision=s.precision)
    ids = server.add("honest", torch.from_numpy(s.honest[0]), torch.from_numpy(s.honest[1]))
    client = ProbingClient("mallory", s.kind, s.own[0], s.own[1], batch=s.batch, seed=s.seed)
    targets = rng.choice(ids, size=s.deletions, replace=False)
    truth, states, probes, reserve_i = [], [], [], 0
    for target in targets.tolist():
        probes.append(_probe_with_concurrency(server, client, s, rng, reserve_i))
        reserve_i += int(probes[-1][1])
        truth.append(server.record(target))
        states.append(server.A.copy())
        server.delete("honest", [target])
    attack = BroadcastDeletionAttack(prior_lam=s.lam)
    rec = attack(server.log_for("mallory"))
    phis, labels = rec.inputs.numpy(), rec.labels.numpy() if rec.labels is not None else None
    if labels is None or rec.certified is None:
        raise RuntimeError("the broadcast attack returned no labels or certificates")
    true_phi = np.stack([t[0] for t in truth])
    true_lab = np.array([t[1] for t in truth])
    cos = abs_cosine(phis, true_phi)
    correct = exact_rows(phis, labels, true_phi, true_lab)
    extras = {"exact_rate": float(correct.mean())}
    return ProtocolOutcome(
        label_accuracy=float((labels == true_lab).mean()),
        cosine=cos,
        state_error=np.array(_state_errors(server, rec.diagnostics["targets"], states, s.lam)),
        rank=np.array(rec.diagnostics["rank"]),
        probes=float(np.mean([p[0] for p in probes])),
        certified=rec.certified.numpy(),
        correct=correct,
        reinsertion_error=_reinsert(server, phis[-1], int(labels[-1]), s.n_classes),
        extras=extras,
    )


def _probe_with_concurrency(
    server: ExactUnlearningServer,
    client: ProbingClient,
    s: ProtocolSetting,
    rng: np.random.Generator,
    start: int,
) -> tuple[int, int]:
    """Probe; with ``concurrent = p`` an honest addition lands after each own message w.p. p."""
    added = [0]

    def between() -> None:
        if s.concurrent > 0 and rng.random() < s.concurrent:
            i = (start + added[0]) % s.reserve[0].shape[0]
            server.add(
                "bob",
                torch.from_numpy(s.reserve[0][i : i + 1]),
                torch.from_numpy(s.reserve[1][i : i + 1]),
            )
            added[0] += 1

    count = client.probe(server, between=between)
    return count, added[0]


def _state_errors(
    server: ExactUnlearningServer, targets: list[int], states: list[np.ndarray], lam: float
) -> list[float]:
    """Relative error of the identified Gram matrix (first 10 deletions)."""
    log = server.log_for("mallory")

    return [
        relative_error(identify_before(log, t, prior_lam=lam).A, A)
        for t, A in list(zip(targets, states))[:10]
    ]


def _reinsert(server: ExactUnlearningServer, phi: np.ndarray, label: int, c: int) -> float:
    """Re-add the last recovered record as a summary; relative distance to the pre-deletion head."""
    before = server.events[-2].head
    msg = SummaryMessage.records(torch.from_numpy(phi[None]), torch.tensor([label]), c)
    server.submit("mallory", msg)
    return relative_error(server.events[-1].head, before)
