"""Benchmark: reconstruction from released checkpoints (issue 3), speed and quality.

Parts in this file (seed 12 and seed 11; the optimizer-fingerprint part is added separately):

- ``init_final``: MNIST, 10 training images (one per class), a 784-256-10 ReLU MLP trained by
  full-batch GD from a known initialisation. The subspace-aware attack and the full-space
  projection attack run for an increasing number of steps; each row gives the wall time, the
  attack steps per second, the median SSIM after one-to-one matching, and its ratio to the
  strongest trivial baseline scored by the same code in the same run (the mean image of the
  held-out MNIST images, 10 random held-out images with the same one-to-one matching, uniform
  random images; nothing computed from the training images). "Time to quality" is the first
  budget whose median SSIM reaches ``--quality``.
- ``prototypes``: steps per second of the batched Gaussian-MLP trainer (80 replicas, N = 100).

Usage:
    python benchmarks/checkpoint_reconstruction.py [--quality 0.3] [--budgets 100 200 400 800]

Writes ``benchmarks/results/checkpoint_reconstruction.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks.checkpoint.init_final import (
    ParameterChangeMatching,
    SubspaceParameterMatching,
)
from trainleak.data import balanced_subset, load_dataset, to_symmetric
from trainleak.metrics import evaluate_reconstruction, random_candidates
from trainleak.metrics.baselines import heldout_candidates
from trainleak.models import model_spec
from trainleak.models.gaussian import GaussianMLP
from trainleak.releases import Knowledge
from trainleak.systems.training import TrainConfig, train_checkpoint
from trainleak.systems.training.prototypes import train_prototype_mlp

OUT = Path(__file__).resolve().parent / "results"


def init_final_rows(budgets: list[int], quality: float) -> list[dict[str, Any]]:
    """Subspace-aware vs full-space attack on MNIST at increasing step budgets."""
    ds = balanced_subset(load_dataset("mnist"), 1, seed=0)
    x = to_symmetric(ds.x)
    spec = model_spec("mlp", input_shape=(1, 28, 28), hidden=[256], out_dim=10)
    cfg = TrainConfig(lr=0.05, steps=300, loss="cross_entropy", log_every=100)
    ckpt, _ = train_checkpoint(spec, x, ds.y, cfg, init_seed=0)
    kn = Knowledge(input_shape=(1, 28, 28), n_records=10, value_range=(-1.0, 1.0))
    gen = torch.Generator().manual_seed(1)
    full = load_dataset("mnist")
    flat, train = full.x.flatten(1), ds.x.flatten(1)
    held_out = torch.ones(len(full), dtype=torch.bool)
    for image in train:
        held_out &= (flat != image).any(dim=1)
    public = to_symmetric(full.x[held_out])
    baselines = {
        "held-out mean image": public.double().mean(0, keepdim=True).float().expand(10, 1, 28, 28),
        "10 random held-out images": heldout_candidates(public, 10, gen),
        "random uniform": random_candidates((1, 28, 28), 10, gen, (-1.0, 1.0)),
    }
    base = {
        k: evaluate_reconstruction(x, v, match="hungarian").median_ssim
        for k, v in baselines.items()
    }
    best_name = max(base, key=lambda k: base[k])
    rows: list[dict[str, Any]] = []
    for label, cls in (
        ("subspace-aware", SubspaceParameterMatching),
        ("full space", ParameterChangeMatching),
    ):
        reached = None
        for steps in budgets:
            rec = cls(steps=steps, lr=0.05, restarts=1, init_std=0.5)(ckpt, kn, seed=0)
            med = evaluate_reconstruction(x, rec.inputs, match="hungarian").median_ssim
            if reached is None and med >= quality:
                reached = rec.seconds
            rows.append(
                {
                    "attack": label,
                    "steps": steps,
                    "seconds": round(rec.seconds, 2),
                    "steps_per_second": round(steps / max(rec.seconds, 1e-9), 1),
                    "median_ssim": round(med, 3),
                    "best_baseline": best_name,
                    "baseline_median_ssim": round(base[best_name], 3),
                    "ratio_to_best_baseline": round(med / base[best_name], 2),
                    f"seconds_to_median_ssim>={quality}": None
                    if reached is None
                    else round(reached, 2),
                }
            )
    return rows


def prototype_rows(steps: int = 300) -> list[dict[str, Any]]:
    """Throughput of the batched Gaussian-MLP trainer (all 8 masks x 10 seeds at N = 100)."""
    n, m = 100, 80
    x = torch.rand(m, n, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor(
        [[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)], dtype=torch.float32
    )
    model = GaussianMLP(n_hidden=n, n_models=m)
    start = time.perf_counter()
    train_prototype_mlp(
        model, x, torch.sin(2 * torch.pi * x), mask.repeat_interleave(10, 0), steps=steps
    )
    sec = time.perf_counter() - start
    return [
        {
            "part": "gaussian-prototypes trainer",
            "N": n,
            "replicas": m,
            "steps": steps,
            "seconds": round(sec, 2),
            "replica_steps_per_second": round(m * steps / sec, 1),
        }
    ]


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Checkpoint reconstruction benchmark (seed 12 and seed 11 parts)",
        "",
        f"Machine: {result['machine']}; torch threads: {result['threads']}.",
        "",
    ]
    for name in ("init_final", "prototypes"):
        rows = result[name]
        keys = list(rows[0])
        lines += [f"## {name}", "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quality", type=float, default=0.3)
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 200, 400, 800])
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = {
        "machine": platform.platform(),
        "threads": torch.get_num_threads(),
        "command": "python benchmarks/checkpoint_reconstruction.py",
        "init_final": init_final_rows(args.budgets, args.quality),
        "prototypes": prototype_rows(),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "checkpoint_reconstruction.json").write_text(json.dumps(result, indent=2))
    (OUT / "checkpoint_reconstruction.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
