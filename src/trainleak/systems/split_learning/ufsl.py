"""U-shaped federated split learning (UFSL): clients hold head and tail, the server the body.

Every round, each client in turn starts from the aggregated head and tail, and for each batch
sends the (defended) smashed data to the server, which runs the body on it; the client's tail
computes the loss with the labels, sends the gradient at the body output back; the server
returns the gradient at the smashed data, through which the client updates its head. The
server's body is updated at every step (sequential SplitFed). After the round the heads and
tails are FedAvg-aggregated, weighted by client data size. The server records its view as a
:class:`~trainleak.releases.split_learning.SplitTranscript`.

References:
    Vepakomma et al., "Split learning for health", arXiv 1812.00564, 2018 (U-shaped split).
    Thapa et al., "SplitFed: When Federated Learning Meets Split Learning", AAAI 2022.
    McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized
    Data", AISTATS 2017 (FedAvg).
    Zaland, Mistry and Bhuyan, arXiv 2602.17614, 2026 (KD-UFSL, the defense option).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.nn import functional as F

from trainleak.defenses.split_learning import KDUFSL
from trainleak.errors import ConfigError
from trainleak.models.spec import StateDict
from trainleak.models.split import SplitModules, SplitSpec, split_modules
from trainleak.releases.split_learning import Aggregate, SplitTranscript
from trainleak.validation import check_fields, param

Client = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class UFSLConfig:
    """Training of U-shaped federated split learning.

    Args:
        rounds: FedAvg rounds.
        local_epochs: passes of each client over its data per round.
        batch_size: records per step (a last batch shorter than the defense's k is merged
            into the one before, so every batch can be k-anonymous).
        lr: SGD learning rate (head, body and tail).
        momentum: SGD momentum.
        record_rounds: the server's transcript keeps the last this many rounds.
    """

    rounds: int = param(20, ge=1, integer=True)
    local_epochs: int = param(1, ge=1, integer=True)
    batch_size: int = param(64, ge=1, integer=True)
    lr: float = param(0.05, gt=0)
    momentum: float = param(0.9, ge=0, lt=1)
    record_rounds: int = param(1, ge=1, integer=True)

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def transmissions(self) -> int:
        """How often each record is sent (for the DP accountant)."""
        return self.rounds * self.local_epochs


@dataclass
class UFSLRun:
    """A finished run: the release, the ground truth only the clients hold, the models.

    Attributes:
        transcript: the server's view (the release).
        row_index: ``(N,)`` for each transcript row, its index in the concatenated client
            data (ground truth; never part of the release).
        parts: the final aggregated head and tail and the server's final body.
        losses: mean training loss per round.
    """

    transcript: SplitTranscript
    row_index: torch.Tensor
    parts: SplitModules
    losses: list[float] = field(default_factory=list)


def _states(parts: SplitModules) -> tuple[StateDict, StateDict]:
    return (
        {k: v.detach().clone() for k, v in parts.head.state_dict().items()},
        {k: v.detach().clone() for k, v in parts.tail.state_dict().items()},
    )


def _fedavg(states: list[StateDict], weights: list[float]) -> StateDict:
    total = sum(weights)
    return {
        k: sum(w / total * s[k] for s, w in zip(states, weights, strict=True))  # type: ignore[misc]
        for k in states[0]
    }


def _batches(n: int, size: int, k: int, g: torch.Generator) -> list[torch.Tensor]:
    perm = torch.randperm(n, generator=g)
    out = list(perm.split(size))
    if len(out) > 1 and len(out[-1]) < k:
        out[-2] = torch.cat([out[-2], out.pop()])
    return out


@dataclass
class _Log:
    smashed: list[torch.Tensor] = field(default_factory=list)
    smashed_grads: list[torch.Tensor] = field(default_factory=list)
    body_grads: list[torch.Tensor] = field(default_factory=list)
    rows: list[torch.Tensor] = field(default_factory=list)
    step: list[torch.Tensor] = field(default_factory=list)
    step_client: list[int] = field(default_factory=list)
    step_round: list[int] = field(default_factory=list)


def _step(
    parts: SplitModules,
    opts: tuple[torch.optim.Optimizer, torch.optim.Optimizer],
    x: torch.Tensor,
    y: torch.Tensor,
    defense: KDUFSL | None,
    g: torch.Generator,
    client: int = 0,
) -> tuple[float, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One split step of client ``client``; returns the loss, the transmitted rows and the
    two gradients."""
    client_opt, server_opt = opts
    client_opt.zero_grad()
    server_opt.zero_grad()
    xb = defense.perturb_input(x, g) if defense is not None else x
    s = parts.head(xb)
    tx = defense.transmit(s, g, client).rows if defense is not None else s
    if not bool(torch.isfinite(tx).all()):
        raise ConfigError.invalid("smashed", "finite smashed data", "NaN or inf (diverged?)")
    s_srv = tx.detach().requires_grad_(True)
    out = parts.body(s_srv)
    o_cli = out.detach().requires_grad_(True)
    loss = F.cross_entropy(parts.tail(o_cli), y)
    loss.backward()
    body_grad = o_cli.grad
    if body_grad is None:
        raise RuntimeError("the tail produced no gradient at the body output")
    out.backward(body_grad)
    smashed_grad = s_srv.grad
    if smashed_grad is None:
        raise RuntimeError("the body produced no gradient at the smashed data")
    tx.backward(smashed_grad)
    client_opt.step()
    server_opt.step()
    return float(loss.detach()), tx.detach(), smashed_grad.detach(), body_grad.detach()


def _check_clients(clients: Sequence[Client], split: SplitSpec, cfg: UFSLConfig, k: int) -> None:
    if not clients:
        raise ConfigError.invalid("clients", "at least one client", 0)
    for i, (x, y) in enumerate(clients):
        if tuple(x.shape[1:]) != tuple(split.input_shape) or y.shape != (x.shape[0],):
            raise ConfigError.invalid(
                f"clients[{i}]",
                f"(x, y) with x (n, *{split.input_shape}) and y (n,)",
                (tuple(x.shape), tuple(y.shape)),
            )
        if len(x) < k:
            raise ConfigError.invalid(
                "k", f"a group size at most client {i}'s data size {len(x)}", k
            )
    if k > cfg.batch_size:
        raise ConfigError.invalid("k", f"a group size at most the batch size {cfg.batch_size}", k)


def train_ufsl(
    clients: Sequence[Client],
    split: SplitSpec,
    cfg: UFSLConfig,
    *,
    defense: KDUFSL | None = None,
    seed: int = 0,
) -> UFSLRun:
    """Train UFSL on the clients' data and record the server's transcript.

    Raises:
        ConfigError: no clients, data of the wrong shape, a defense's k larger than the
            batch or a client's data, a split point beyond the model's depth, or smashed data
            that became non-finite.
    """
    k = defense.spec.k if defense is not None else 1
    _check_clients(clients, split, cfg, k)
    g = torch.Generator().manual_seed(seed)
    parts = split_modules(split, seed=seed)
    server_opt = torch.optim.SGD(parts.body.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    offsets = torch.tensor([0] + [len(c[0]) for c in clients]).cumsum(0)
    head, tail = _states(parts)
    log, aggs, losses = _Log(), [], []
    first_recorded = cfg.rounds - min(cfg.record_rounds, cfg.rounds)
    for r in range(cfg.rounds):
        record = r >= first_recorded
        if record:
            aggs.append(Aggregate(r, head, tail))
        heads, tails, round_loss = [], [], []
        for c, (x, y) in enumerate(clients):
            parts.head.load_state_dict(head)
            parts.tail.load_state_dict(tail)
            client_params = [*parts.head.parameters(), *parts.tail.parameters()]
            client_opt = torch.optim.SGD(client_params, lr=cfg.lr, momentum=cfg.momentum)
            for _ in range(cfg.local_epochs):
                for idx in _batches(len(x), cfg.batch_size, k, g):
                    loss, tx, sg, bg = _step(
                        parts, (client_opt, server_opt), x[idx], y[idx], defense, g, c
                    )
                    round_loss.append(loss)
                    if record:
                        _append(log, tx, sg, bg, idx + offsets[c], c, r)
            h, t = _states(parts)
            heads.append(h)
            tails.append(t)
        weights = [float(len(cl[0])) for cl in clients]
        head, tail = _fedavg(heads, weights), _fedavg(tails, weights)
        losses.append(sum(round_loss) / len(round_loss))
    aggs.append(Aggregate(cfg.rounds, head, tail))
    parts.head.load_state_dict(head)
    parts.tail.load_state_dict(tail)
    transcript = SplitTranscript(
        split=split,
        smashed=torch.cat(log.smashed),
        smashed_grads=torch.cat(log.smashed_grads),
        body_grads=torch.cat(log.body_grads),
        step=torch.cat(log.step),
        step_client=torch.tensor(log.step_client, dtype=torch.int64),
        step_round=torch.tensor(log.step_round, dtype=torch.int64),
        aggregates=tuple(aggs),
        n_clients=len(clients),
        defense=None if defense is None else defense.spec,
    )
    return UFSLRun(transcript, torch.cat(log.rows), parts, losses)


def _append(
    log: _Log,
    tx: torch.Tensor,
    sg: torch.Tensor,
    bg: torch.Tensor,
    rows: torch.Tensor,
    c: int,
    r: int,
) -> None:
    t = len(log.step_client)
    log.smashed.append(tx)
    log.smashed_grads.append(sg)
    log.body_grads.append(bg)
    log.rows.append(rows)
    log.step.append(torch.full((len(rows),), t, dtype=torch.int64))
    log.step_client.append(c)
    log.step_round.append(r)


@torch.no_grad()
def split_accuracy(
    parts: SplitModules,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    defense: KDUFSL | None = None,
    batch_size: int = 64,
    seed: int = 0,
) -> float:
    """Test accuracy of the split model; with ``defense``, the test batches go through it as
    in deployment (noise, and MDAV within each batch of ``batch_size``), sent as the first
    client (with its tracked subspace when the defense is sketched)."""
    g = torch.Generator().manual_seed(seed)
    k = defense.spec.k if defense is not None else 1
    correct = 0
    for idx in _batches(len(x), batch_size, k, torch.Generator().manual_seed(seed)):
        xb = defense.perturb_input(x[idx], g) if defense is not None else x[idx]
        s = parts.head(xb)
        s = defense.transmit(s, g).rows if defense is not None else s
        pred = parts.tail(parts.body(s)).argmax(1)
        correct += int((pred == y[idx]).sum())
    return correct / max(len(x), 1)
