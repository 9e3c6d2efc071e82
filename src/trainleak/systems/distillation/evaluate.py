"""The distillation evaluation protocol: train a fresh network on a set and measure its test
accuracy, beside random real subsets of the same size trained the same way.

A distilled set is only a distillation if it beats random real images of the same budget
(otherwise the algorithm added nothing); both numbers are reported.

References:
    Zhao, Mopuri and Bilen, "Dataset Condensation with Gradient Matching", ICLR 2021 (protocol
    and the random-subset baseline).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainleak.data.augment import DiffAugment
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
    """

    steps: int = param(300, ge=1, integer=True)
    lr: float = param(0.05, gt=0)
    batch_size: int = param(256, ge=1, integer=True)
    augment: bool = False
    models: int = param(1, ge=1, integer=True)
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_fields(self)


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


def set_accuracies(
    release: DistilledSet,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
) -> list[float]:
    """Test accuracy of each of ``protocol.models`` fresh networks trained on the release
    (network ``m`` has seed ``seed + m``)."""
    return [
        accuracy(
            train_on(release.images, release.labels, spec, protocol, seed + m, release.lr), *test
        )
        for m in range(protocol.models)
    ]


def set_accuracy(
    release: DistilledSet,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
) -> float:
    """Mean test accuracy of ``protocol.models`` fresh networks trained on the release."""
    accs = set_accuracies(release, spec, test, protocol, seed)
    return sum(accs) / len(accs)


def random_subset_accuracies(
    x: torch.Tensor,
    y: torch.Tensor,
    ipc: int,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
) -> list[float]:
    """Test accuracy after training on ``ipc`` random real images per class, one draw (and one
    fresh network, seed ``seed + m``) for each of ``protocol.models``.

    Pass the protocol the distilled sets are evaluated with (only ``models`` may differ): the
    same steps, learning rate, batch size and augmentation, so the two sides get the same
    training budget (a learned learning rate published with a distilled set is part of that
    release and is the one exception).
    """
    by_class = class_indices(y, int(y.max()) + 1)
    accs = []
    for m in range(protocol.models):
        g = torch.Generator().manual_seed(10_000 + seed + m)
        idx = torch.cat([c[torch.randperm(c.numel(), generator=g)[:ipc]] for c in by_class])
        net = train_on(x[idx], y[idx], spec, protocol, seed + m)
        accs.append(accuracy(net, *test))
    return accs


def random_subset_accuracy(
    x: torch.Tensor,
    y: torch.Tensor,
    ipc: int,
    spec: ModelSpec,
    test: tuple[torch.Tensor, torch.Tensor],
    protocol: EvalProtocol,
    seed: int = 0,
) -> float:
    """Mean of :func:`random_subset_accuracies`."""
    accs = random_subset_accuracies(x, y, ipc, spec, test, protocol, seed)
    return sum(accs) / len(accs)
