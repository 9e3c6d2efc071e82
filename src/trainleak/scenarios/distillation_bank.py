"""Distillation runs cached by content hash, and the adversary's shadow bank.

A distillation is a pure function of (data, labels, architecture, config, seed, range), so its
output is cached on disk under the SHA-256 of all of them: ``<cache_dir>/<hash>/`` holds the
release (``set.safetensors`` + ``set.json``, see :class:`DistilledSet`) and, for a real
initialisation, ``init.safetensors`` with the initialisation indices. Nothing is unpickled.

The shadow bank is distilled by the adversary from its auxiliary data only: for every seed, a
random half of the auxiliary records, then every (algorithm, architecture) pair on it; each
shadow set records that half (``info["aux_source"]``) so the revelation attack can measure it
against auxiliary records it was not distilled from, and, for a real initialisation, the
auxiliary record each of its images started from (``info["init_source"]``), from which the
membership attack learns how far distillation moves an image.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from trainleak.models.spec import ModelSpec
from trainleak.parallel import pmap
from trainleak.progress import Progress
from trainleak.releases.distilled import DistilledSet, ShadowBank, ShadowSet
from trainleak.scenarios._cache import cache_root
from trainleak.systems.distillation import DistillationRun, DistillConfig, distill


def default_cache_dir() -> Path:
    """``$TRAINLEAK_CACHE/distillation``, else ``~/.cache/trainleak/distillation``."""
    return cache_root("distillation")


def run_key(
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    spec: ModelSpec,
    config: DistillConfig,
    seed: int,
    value_range: tuple[float, float],
    device: str = "cpu",
) -> str:
    """The content hash of one distillation's inputs (a device other than CPU is part of the
    key: its floating point differs, so its sets are kept apart)."""
    h = hashlib.sha256()
    for t in (x.float(), y):
        h.update(str((tuple(t.shape), t.dtype)).encode())
        h.update(t.contiguous().numpy().tobytes())
    meta: tuple[object, ...] = (
        num_classes,
        spec.kind,
        sorted(spec.kwargs.items()),
        config,
        seed,
        value_range,
    )
    if torch.device(device).type != "cpu":
        meta = (*meta, torch.device(device).type)
    h.update(repr(meta).encode())
    return h.hexdigest()


def cached_distill(
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    spec: ModelSpec,
    config: DistillConfig,
    *,
    seed: int,
    value_range: tuple[float, float] = (0.0, 1.0),
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    device: str = "cpu",
) -> DistillationRun:
    """:func:`~trainleak.systems.distillation.distill`, read from or written to the cache.

    ``cache_dir=None`` disables the cache. A cached run has an empty loss trace.
    """
    if cache_dir is None:
        return distill(
            x, y, num_classes, spec, config, seed=seed, value_range=value_range, device=device
        )
    folder = cache_dir / run_key(x, y, num_classes, spec, config, seed, value_range, device)
    init_file = folder / "init.safetensors"
    if (folder / "set.json").is_file():
        release = DistilledSet.load(folder)
        init = load_file(str(init_file))["init"] if init_file.is_file() else None
        return DistillationRun(release, config.name, spec, seed, init)
    run = distill(
        x,
        y,
        num_classes,
        spec,
        config,
        seed=seed,
        value_range=value_range,
        progress=progress,
        device=device,
    )
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    run.release.save(tmp)
    if run.init_indices is not None:
        save_file({"init": run.init_indices.contiguous()}, str(tmp / "init.safetensors"))
    try:
        tmp.rename(folder)
    except OSError:  # another process wrote it first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return run


@dataclass(frozen=True)
class DistillJob:
    """The arguments of one :func:`cached_distill` call."""

    x: torch.Tensor
    y: torch.Tensor
    num_classes: int
    spec: ModelSpec
    config: DistillConfig
    seed: int
    value_range: tuple[float, float] = (0.0, 1.0)
    device: str = "cpu"

    def key(self) -> str:
        """The cache key of its run."""
        return run_key(
            self.x,
            self.y,
            self.num_classes,
            self.spec,
            self.config,
            self.seed,
            self.value_range,
            self.device,
        )

    def run(self, cache_dir: Path | None) -> DistillationRun:
        """The run, from the cache or distilled now (and cached)."""
        return cached_distill(
            self.x,
            self.y,
            self.num_classes,
            self.spec,
            self.config,
            seed=self.seed,
            value_range=self.value_range,
            cache_dir=cache_dir,
            device=self.device,
        )


def _distil_into(item: tuple[DistillJob, Path]) -> str:
    job, cache_dir = item
    job.run(cache_dir)
    return job.key()


def prefill(
    jobs: Sequence[DistillJob],
    cache_dir: Path,
    workers: int,
    progress: Progress | None = None,
    label: str = "distillations",
) -> int:
    """Distil every job that is not in the cache yet in ``workers`` processes
    (:func:`trainleak.parallel.pmap`), each writing its run to ``cache_dir`` (read them
    afterwards with :meth:`DistillJob.run`).

    Every distillation is seeded on its own, so a run distilled here is the run the calling
    process would distil (up to the floating-point order of its thread count), and a run that
    dies leaves every finished set in the cache. With ``workers <= 1`` nothing is done here:
    the caller distils as it reads.

    Returns:
        The number of runs distilled.

    Raises:
        Exception: the first error a worker met (the jobs not yet started are cancelled).
    """
    if workers <= 1:  # no hashing either: the caller's reads key every job anyway
        return 0
    todo: dict[str, DistillJob] = {}
    for job in jobs:
        key = job.key()
        if key not in todo and not (cache_dir / key / "set.json").is_file():
            todo[key] = job
    if not todo:
        return 0
    return len(
        pmap(_distil_into, [(j, cache_dir) for j in todo.values()], workers, progress, label)
    )


def aux_half(n: int, seed: int) -> torch.Tensor:
    """The random half of ``n`` auxiliary records used by shadow seed ``seed``."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(7_000 + seed))[: n // 2]


def shadow_jobs(
    aux: tuple[torch.Tensor, torch.Tensor],
    num_classes: int,
    configs: Mapping[str, DistillConfig],
    architectures: Mapping[str, ModelSpec],
    seeds: Sequence[int],
    *,
    value_range: tuple[float, float] = (0.0, 1.0),
    device: str = "cpu",
) -> list[tuple[int, str, str, torch.Tensor, DistillJob]]:
    """``(seed, algorithm, architecture, auxiliary half, job)`` of every shadow set, in the
    bank's order (see :func:`build_shadow_bank`)."""
    out = []
    for seed in seeds:
        half = aux_half(len(aux[0]), seed)
        x, y = aux[0][half], aux[1][half]
        for algo, cfg in configs.items():
            for kind, spec in architectures.items():
                job = DistillJob(x, y, num_classes, spec, cfg, seed, value_range, device)
                out.append((seed, algo, kind, half, job))
    return out


def build_shadow_bank(
    aux: tuple[torch.Tensor, torch.Tensor],
    num_classes: int,
    configs: Mapping[str, DistillConfig],
    architectures: Mapping[str, ModelSpec],
    seeds: Sequence[int],
    *,
    value_range: tuple[float, float] = (0.0, 1.0),
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    device: str = "cpu",
    workers: int = 1,
) -> ShadowBank:
    """Distil every (algorithm, architecture) pair on a random auxiliary half per seed.

    Args:
        aux: the adversary's labelled auxiliary data.
        num_classes: classes of the task.
        configs: the candidate algorithms, by name, with their settings.
        architectures: the candidate architectures, by kind.
        seeds: shadow seeds (each draws its own auxiliary half).
        value_range: the images' range.
        cache_dir: where runs are cached (``None``: no cache).
        progress: called once per shadow set.
        device: where the distillations run.
        workers: processes distilling the sets in parallel (needs ``cache_dir``; 1: in this
            process, one after the other).
    """
    jobs = shadow_jobs(
        aux, num_classes, configs, architectures, seeds, value_range=value_range, device=device
    )
    if cache_dir is not None:
        prefill([j[-1] for j in jobs], cache_dir, workers, progress, "shadow bank")
    sets = []
    for seed, algo, kind, half, job in jobs:
        run = job.run(cache_dir)
        cfg = job.config
        info: dict[str, object] = {"init": cfg.init, "ipc": cfg.ipc, "aux_source": half}
        if run.init_indices is not None:
            info["init_source"] = half[run.init_indices]
        sets.append(ShadowSet(run.release, algo, kind, seed, info))
        if progress is not None:
            progress("shadow bank", len(sets), len(jobs))
    return ShadowBank(tuple(sets))
