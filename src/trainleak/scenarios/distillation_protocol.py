"""The distillation protocol check on its own, one setting at a time: distil the training
records with one algorithm, architecture and images-per-class, train fresh networks on the
distilled set, and train the same networks, the same way, on random real subsets of the same
size.

Both sides get the same protocol (steps, learning rate or learning-rate grid, batch,
augmentation, device); a learning rate learned by the distillation (MTT) is part of that
release and is used for it (with a grid, it joins the set's grid). With a grid each side
chooses its rate on the training records (the distiller's own data), never on the test records.
Every accuracy is kept (one per fresh network, one per random draw), so a setting can be
decided by an interval rather than a mean.

References:
    Zhao, Mopuri and Bilen, "Dataset Condensation with Gradient Matching", ICLR 2021 (the
    protocol and the random-subset baseline).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from trainleak.metrics.intervals import difference_lower_bound, mean_lower_bound, mean_upper_bound
from trainleak.models.fitting import accuracy
from trainleak.models.spec import ModelSpec
from trainleak.scenarios.distillation import Task
from trainleak.systems.distillation import (
    DCConfig,
    DistillConfig,
    DMConfig,
    EvalProtocol,
    MTTConfig,
    distill,
    random_subset_accuracies,
    set_accuracies,
    train_on,
)


@dataclass(frozen=True)
class SettingCheck:
    """One setting's accuracies: ``distilled`` has one entry per (seed, fresh network),
    ``random`` one per random draw; ``lr`` the learned learning rates (MTT) per seed."""

    algorithm: str
    architecture: str
    ipc: int
    init: str
    distilled: tuple[float, ...]
    random: tuple[float, ...]
    lr: tuple[float | None, ...]
    seconds: float

    def summary(self) -> dict[str, Any]:
        """:func:`setting_summary` plus every accuracy, the learned rates and the time."""
        return setting_summary(list(self.distilled), list(self.random)) | {
            "seconds": self.seconds,
            "learned_lr": list(self.lr),
            "distilled_accs": list(self.distilled),
            "random_accs": list(self.random),
        }


def check_setting(
    task: Task,
    spec: ModelSpec,
    config: DistillConfig,
    protocol: EvalProtocol,
    *,
    seeds: int,
    draws: int,
    device: str = "cpu",
) -> SettingCheck:
    """Distil ``task.private`` with ``config`` for ``seeds`` seeds and compare each distilled
    set with ``draws`` random real subsets of ``config.ipc`` images per class, all trained
    under ``protocol`` and tested on ``task.holdout``."""
    start = time.perf_counter()
    test = task.holdout
    distilled: list[float] = []
    lrs: list[float | None] = []
    for s in range(seeds):
        run = distill(*task.private, task.num_classes, spec, config, seed=1000 + s, device=device)
        lrs.append(run.release.lr)
        distilled += set_accuracies(
            run.release, spec, test, protocol, seed=100 * s, select=task.private
        )
    rand_protocol = dataclasses.replace(protocol, models=draws)
    random = random_subset_accuracies(
        *task.private, config.ipc, spec, test, rand_protocol, select=task.private
    )
    return SettingCheck(
        config.name,
        spec.kind,
        config.ipc,
        config.init,
        tuple(distilled),
        tuple(random),
        tuple(lrs),
        time.perf_counter() - start,
    )


def check_settings(
    task: Task,
    spec: ModelSpec,
    protocol: EvalProtocol,
    ipcs: Sequence[int],
    scale: float,
    seeds: int,
    draws: int,
) -> Iterator[SettingCheck]:
    """:func:`check_setting` for DC (DSA with ``protocol.augment``), DM and MTT at each ipc,
    real-initialised, iterations scaled by ``scale``, on ``protocol.device``; one at a time."""
    for ipc in ipcs:
        for config in protocol_configs(ipc, scale, protocol.augment):
            yield check_setting(
                task, spec, config, protocol, seeds=seeds, draws=draws, device=protocol.device
            )


def full_accuracy(task: Task, spec: ModelSpec, protocol: EvalProtocol) -> float:
    """Test accuracy of one network trained on all of ``task.private`` (the upper reference),
    at the protocol's last grid rate when it has a grid."""
    one = protocol.single_rate()
    return accuracy(train_on(*task.private, spec, one, seed=0), *task.holdout)


def protocol_configs(ipc: int, scale: float, augment: bool) -> list[DistillConfig]:
    """DC (DSA when ``augment``), DM and MTT at ``ipc``, real-initialised, each algorithm's
    default iterations scaled by ``scale``."""
    return [
        cls(ipc=ipc, iterations=max(1, round(cls(ipc=ipc).iterations * scale)), augment=augment)
        for cls in (DCConfig, DMConfig, MTTConfig)
    ]


def _interval(values: list[float]) -> list[float] | None:
    """Two-sided 95% Student-t interval of the mean (``None`` for fewer than two values)."""
    if len(values) < 2:
        return None
    return [mean_lower_bound(values, 0.975), mean_upper_bound(values, 0.975)]


def setting_summary(dist: list[float], rand: list[float]) -> dict[str, Any]:
    """Both accuracies of one setting, their 95% intervals and the one-sided 95% Welch lower
    bound on the gain (the experiment's claim decides each setting by this bound)."""
    enough = len(dist) >= 2 and len(rand) >= 2
    return {
        "distilled": float(mean(dist)),
        "distilled_95": _interval(dist),
        "random": float(mean(rand)),
        "random_95": _interval(rand),
        "gain": mean(dist) - mean(rand),
        "gain_lower_95": difference_lower_bound(dist, rand, paired=False) if enough else None,
        "n": [len(dist), len(rand)],
    }
