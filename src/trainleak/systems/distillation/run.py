"""One entry point for every algorithm: :func:`distill` turns real data into a release."""

from __future__ import annotations

import torch

from trainleak.errors import ConfigError
from trainleak.models.spec import ModelSpec
from trainleak.progress import Progress
from trainleak.releases.distilled import DistilledSet
from trainleak.systems.distillation.common import (
    DistillationRun,
    DistillConfig,
    check_data,
    class_indices,
    initial_images,
    synthetic_labels,
)
from trainleak.systems.distillation.dc import DCConfig, match_dc
from trainleak.systems.distillation.dm import DMConfig, match_dm
from trainleak.systems.distillation.mtt import MTTConfig, match_mtt

ALGORITHMS: dict[str, type[DistillConfig]] = {"dc": DCConfig, "dm": DMConfig, "mtt": MTTConfig}
"""The algorithms, by name, with their config types."""


def distill(
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    architecture: ModelSpec,
    config: DistillConfig,
    *,
    seed: int = 0,
    value_range: tuple[float, float] = (0.0, 1.0),
    progress: Progress | None = None,
    device: str | torch.device = "cpu",
) -> DistillationRun:
    """Distil ``(x, y)`` into ``config.ipc`` images per class with ``architecture``.

    Args:
        x: the real images ``(n, C, H, W)``, inside ``value_range``.
        y: their hard labels ``(n,)``.
        num_classes: the number of classes K.
        architecture: the network the algorithm matches through (built for ``x``'s shape
            and K outputs).
        config: a :class:`DCConfig`, :class:`DMConfig` or :class:`MTTConfig`.
        seed: the seed of every draw (initial images, networks, batches, augmentations).
        value_range: the box the images live in; the synthetic images stay inside it.
        progress: optional progress callback.
        device: where the images and networks live during the distillation (random draws
            stay on CPU generators, so a run is the same draw sequence on every device); the
            release and the initialisation indices come back on CPU.

    Returns:
        The release and the distiller's record (initialisation indices, loss trace).
    """
    check_data(x, y, num_classes)
    if not isinstance(config, tuple(ALGORITHMS.values())):
        raise ConfigError.invalid("config", f"one of {list(ALGORITHMS)} configs", type(config))
    g = torch.Generator().manual_seed(seed)
    x, y = x.float().to(device), y.to(device)
    syn, init_idx = initial_images(x, class_indices(y, num_classes), config, value_range, g)
    lr: float | None = None
    if isinstance(config, DCConfig):
        syn, trace = match_dc(x, y, syn, architecture, config, value_range, g, progress)
    elif isinstance(config, DMConfig):
        syn, trace = match_dm(x, y, syn, architecture, config, value_range, g, progress)
    else:
        if not isinstance(config, MTTConfig):
            raise ConfigError.invalid("config", "an MTTConfig", type(config))
        syn, lr, trace = match_mtt(x, y, syn, architecture, config, value_range, g, progress)
    release = DistilledSet(
        images=syn.cpu(),
        labels=synthetic_labels(num_classes, config.ipc),
        num_classes=num_classes,
        value_range=value_range,
        lr=lr,
    )
    init_cpu = None if init_idx is None else init_idx.cpu()
    return DistillationRun(release, config.name, architecture, seed, init_cpu, trace)
