"""The distillation evaluation protocol: train a fresh network on a set and measure its test
accuracy, beside random real subsets of the same size trained the same way.

A distilled set is only a distillation if it beats random real images of the same budget
(otherwise the algorithm added nothing); both numbers are reported.

A network's learning rate decides whether it trains at all on a small synthetic set (an MLP on
distilled CIFAR-10 images diverges at a rate that suits random real images), so the protocol can
choose it: with ``lr_grid`` each side (a distilled set, and the random subsets it is compared
with) trains its networks at every rate of the same grid and keeps the rate whose networks
score best on *selection* data the distiller holds (its private set), never the test data; the
test accuracies reported are those of the kept networks. A rate published with a set (MTT's)
joins that set's grid, since it is part of the release. The papers tune the evaluation rate per
set as well (Cazenavette et al. 2022 learn it; Zhao et al. fix 0.01).

References:
    Zhao, Mopuri and Bilen, "Dataset Condensation with Gradient Matching", ICLR 2021 (protocol
    and the random-subset baseline).
    Cazenavette et al., "Dataset Distillation by Matching Training Trajectories", CVPR 2022
    (the evaluation learning rate as part of the distilled release).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

from trainleak.data.augment import DiffAugment
from trainleak.errors import ConfigError
from trainleak.models.fitting import accuracy, fit
from trainleak.models.registry import build_model
from trainleak.models.spec import ModelSpec
from trainleak.releases.distilled import DistilledSet
from trainleak.systems.distillation.common import class_indices
from trainleak.validation import check_fields, param


@dataclass(frozen=True)
class EvalProtocol:
    """How a fresh network is trained on a set: SGD with momentum 0.9, full batch up to
    ``batch_size``, learning rate divided by 10 half way; a learned ``lr`` published with the
    set replaces ``lr``.

    Args:
        steps: optimiser steps.
        lr: learning rate (unless the set publishes one).
        batch_size: minibatch size.
        augment: DSA augmentation of every batch.
        models: fresh networks per set (their test accuracies are averaged).
        device: where the networks are trained and tested (batch draws stay on CPU).
        lr_grid: learning rates to choose among on selection data (empty: ``lr`` alone, or
            the set's published rate); see the module docstring.
    """

    steps: int = param(300, ge=1, integer=True)
    lr: float = param(0.05, gt=0)
    batch_size: int = param(256, ge=1, integer=True)
    augment: bool = False
    models: int = param(1, ge=1, integer=True)
    device: str = "cpu"
    lr_grid: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        check_fields(self)
        if any(not (isinstance(r, int | float) and r > 0) for r in self.lr_grid):
            raise ConfigError.invalid("lr_grid", "positive learning rates", self.lr_grid)
        if len(set(self.lr_grid)) != len(self.lr_grid):
            raise ConfigError.invalid("lr_grid", "distinct learning rates", self.lr_grid)

    @classmethod
    def from_rates(cls, rates: Sequence[float], **kwargs: object) -> EvalProtocol:
        """A protocol at one rate (``rates`` of length one) or choosing among ``rates``."""
        grid = tuple(rates) if len(rates) > 1 else ()
        return cls(lr=rates[-1], lr_grid=grid, **kwargs)  # type: ignore[arg-type]

    def single_rate(self) -> EvalProtocol:
        """This protocol without a choice, at its last candidate rate (for a reference whose
        selection data would be its own training set)."""
        return replace(self, lr=self.rates()[-1], lr_grid=())

    def rates(self, published: float | None = None) -> list[float]:
        """The learning rates a side is trained at: the grid (plus a published rate), or the
        published rate, or ``lr``."""
        if not self.lr_grid:
            return [self.lr if published is None else published]
        extra = [] if published is None or published in self.lr_grid else [published]
        return [*self.lr_grid, *extra]


@dataclass(frozen=True)
class Evaluation:
    """What one side of the protocol measured.

    Attributes:
        accuracies: test accuracy of each reported network.
        lr: the learning rate those networks were trained at.
        selection: mean selection-data accuracy per candidate rate (empty without a choice).
    """

    accuracies: tuple[float, ...]
    lr: float
    selection: dict[float, float] = field(default_factory=dict)


Nets = Callable[[float], list[torch.nn.Module]]


def _choose(
    rates: Sequence[float],
    nets_at: Nets,
    test: tuple[torch.Tensor, torch.Tensor],
    select: tuple[torch.Tensor, torch.Tensor] | None,
) -> Evaluation:
    """Train ``nets_at(rate)`` for each rate, keep the rate whose networks have the best mean
    accuracy on ``select`` (the first on ties), report the kept networks on ``test``."""
    if len(rates) == 1:
        return Evaluation(tuple(accuracy(n, *test) for n in nets_at(rates[0])), rates[0])
    if select is None:
        raise ConfigError(
            "the protocol chooses among learning rates "
            f"{list(rates)}: pass selection data (select=...) held apart from the test data"
        )
    scores: dict[float, float] = {}
    best_rate, best_nets = rates[0], nets_at(rates[0])
    scores[best_rate] = sum(accuracy(n, *select) for n in best_nets) / len(best_nets)
    for rate in rates[1:]:
        nets = nets_at(rate)
        scores[rate] = sum(accuracy(n, *select) for n in nets) / len(nets)
        if scores[rate] > scores[best_rate]:
            best_rate, best_nets = rate, nets
    return Evaluation(tuple(accuracy(n, *test) for n in best_nets), best_rate, scores)


def train_on(
    images: torch.Tensor,
    labels: torch.Tensor,
    spec: ModelSpec,
    protocol: EvalProtocol,
    seed: int,
    lr: float | None = None,
) -> torch.nn.Module:
    """A fresh ``spec`` network trained on ``(images, labels)`` under ``protocol`` (on
    ``protocol.device``), returned on CPU."""
    g = torch.Generator().manual_seed(seed)
    net = build_model(spec, seed=seed).to(protocol.device)
    fit(
        net,
        images.to(protocol.device),
        labels.to(protocol.device),
        steps=protocol.steps,
        lr=protocol.lr if lr is None else lr,
        generator=g,
        batch_size=protocol.batch_size,
        augment=DiffAugment() if protocol.augment else None,
    )
    return net.cpu()


def evaluate_set(
    release: DistilledSet,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
    select: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Evaluation:
    """``protocol.models`` fresh networks trained on the release (network ``m`` has seed
    ``seed + m``), at the rate :meth:`EvalProtocol.rates` gives or the best of them on
    ``select``.

    Raises:
        ConfigError: when the protocol has a grid and ``select`` is missing.
    """

    def nets_at(rate: float) -> list[torch.nn.Module]:
        return [
            train_on(release.images, release.labels, spec, protocol, seed + m, rate)
            for m in range(protocol.models)
        ]

    return _choose(protocol.rates(release.lr), nets_at, test, select)


def set_accuracies(
    release: DistilledSet,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
    select: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> list[float]:
    """Test accuracy of each network of :func:`evaluate_set`."""
    return list(evaluate_set(release, spec, test, protocol, seed, select).accuracies)


def set_accuracy(
    release: DistilledSet,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
    select: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> float:
    """Mean test accuracy of ``protocol.models`` fresh networks trained on the release."""
    accs = set_accuracies(release, spec, test, protocol, seed, select)
    return sum(accs) / len(accs)


def evaluate_random_subsets(
    x: torch.Tensor,
    y: torch.Tensor,
    ipc: int,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
    select: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Evaluation:
    """Training on ``ipc`` random real images per class, one draw (and one fresh network, seed
    ``seed + m``) for each of ``protocol.models``; every candidate rate sees the same draws.

    Pass the protocol the distilled sets are evaluated with (only ``models`` may differ): the
    same steps, learning-rate grid, batch size and augmentation, so the two sides get the same
    training budget (a learned learning rate published with a distilled set is part of that
    release and is the one exception).
    """
    by_class = class_indices(y, int(y.max()) + 1)
    draws = []
    for m in range(protocol.models):
        g = torch.Generator().manual_seed(10_000 + seed + m)
        draws.append(torch.cat([c[torch.randperm(c.numel(), generator=g)[:ipc]] for c in by_class]))

    def nets_at(rate: float) -> list[torch.nn.Module]:
        return [
            train_on(x[idx], y[idx], spec, protocol, seed + m, rate) for m, idx in enumerate(draws)
        ]

    return _choose(protocol.rates(), nets_at, test, select)


def random_subset_accuracies(
    x: torch.Tensor,
    y: torch.Tensor,
    ipc: int,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
    select: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> list[float]:
    """Test accuracy of each network of :func:`evaluate_random_subsets`."""
    return list(evaluate_random_subsets(x, y, ipc, spec, test, protocol, seed, select).accuracies)


def random_subset_accuracy(
    x: torch.Tensor,
    y: torch.Tensor,
    ipc: int,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
    select: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> float:
    """Mean of :func:`random_subset_accuracies`."""
    accs = random_subset_accuracies(x, y, ipc, spec, test, protocol, seed, select)
    return sum(accs) / len(accs)
