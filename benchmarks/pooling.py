"""Benchmark: 2x2 average pooling as a matrix product (``models.pooling``) against torch's
``avg_pool2d``, in the same run, one thread.

Two parts:

- the operation alone on the ConvNet's feature maps (digits 8x8 and CIFAR-10 32x32 inputs,
  batches 100 and 256): forward, forward + backward, and the double backward trajectory
  matching takes (the gradient in the input of a gradient in a channel scale), median of
  repeats, with the largest difference of the outputs;
- with ``--distillations``: the ConvNet distillations of the default ``distillation-leakage``
  run (DC, DM, MTT on the first shadow half, the whole job as in the run), once with the
  ConvNet's pooling swapped back to ``nn.AvgPool2d(2)`` and once as built, with the largest
  pixel difference of the two released sets; ``--dataset cifar10`` takes the CIFAR-10
  configuration of ``benchmarks/distillation.py`` (``CONFIGS``) instead (needs ``--data-dir``
  or ``TRAINLEAK_DATA``).

``python benchmarks/pooling.py [--distillations [--dataset cifar10 --data-dir DIR]]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from distillation import CONFIGS  # benchmarks/distillation.py, beside this script
from trainleak.experiments.distillation_leakage import shadow_bank_jobs
from trainleak.experiments.distillation_leakage_claims import DistillationLeakageConfig
from trainleak.models.convnet import ConvNet
from trainleak.models.pooling import AvgPool2x2, avg_pool_2x2
from trainleak.scenarios.distillation import candidate_specs, split_task
from trainleak.scenarios.distillation_bank import DistillJob
from trainleak.systems.distillation import DistillationRun

SHAPES = [(100, 16, 8, 8), (100, 32, 4, 4), (256, 16, 8, 8), (100, 16, 32, 32), (100, 32, 16, 16)]


def _median_us(f: Callable[[], object], repeats: int = 7, inner: int = 20) -> float:
    for _ in range(3):
        f()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            f()
        times.append((time.perf_counter() - t) / inner * 1e6)
    return statistics.median(times)


def _timings(
    pool: Callable[[torch.Tensor], torch.Tensor], x0: torch.Tensor, scale: torch.Tensor
) -> dict[str, float]:
    """Median microseconds of ``pool``: forward, forward + backward, double backward."""
    x = x0.clone().requires_grad_(True)
    w = scale.clone().requires_grad_(True)

    def fwd_bwd() -> None:
        torch.autograd.grad(pool(x).sum(), x)

    def double() -> None:
        y = pool(x * w.view(1, -1, 1, 1))
        (gw,) = torch.autograd.grad((y**2).sum(), w, create_graph=True)
        torch.autograd.grad(gw.sum(), x)

    return {
        "forward": _median_us(lambda: pool(x0)),
        "fwd_bwd": _median_us(fwd_bwd),
        "double": _median_us(double, repeats=5, inner=5),
    }


def _op_rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    pools: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "avg_pool2d": lambda t: F.avg_pool2d(t, 2),
        "product": avg_pool_2x2,
    }
    for shape in SHAPES:
        g = torch.Generator().manual_seed(0)
        x0 = torch.randn(*shape, generator=g)
        scale = torch.randn(shape[1], generator=g)
        row: dict[str, object] = {
            "shape": list(shape),
            "max_abs_diff": float((avg_pool_2x2(x0) - F.avg_pool2d(x0, 2)).abs().max()),
        }
        times = {name: _timings(pool, x0, scale) for name, pool in pools.items()}
        for part in ("forward", "fwd_bwd", "double"):
            for name in pools:
                row[f"{name}_{part}_us"] = times[name][part]
            row[f"{part}_speedup"] = times["avg_pool2d"][part] / times["product"][part]
        rows.append(row)
        print(row, flush=True)
    return rows


def _with_torch_pooling() -> Callable[[], None]:
    """Make new ConvNets pool with ``nn.AvgPool2d(2)``; returns the undo."""
    original = ConvNet.__init__

    def patched(self: ConvNet, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        for i, m in enumerate(self.features):
            if isinstance(m, AvgPool2x2):
                self.features[i] = nn.AvgPool2d(2)

    ConvNet.__init__ = patched  # type: ignore[method-assign]

    def undo() -> None:
        ConvNet.__init__ = original  # type: ignore[method-assign]

    return undo


def _distillation_rows(dataset: str, data_dir: str | None) -> list[dict[str, object]]:
    # the distillation benchmark's configuration of the data set (the first shadow seed's
    # ConvNet jobs are the same whatever its seed counts)
    cfg = DistillationLeakageConfig(**CONFIGS[dataset])
    task = split_task(
        cfg.dataset, cfg.n_private, cfg.n_aux, cfg.n_holdout, cfg.seed, data_dir=data_dir
    )
    specs = candidate_specs(list(cfg.architectures), task.input_shape, task.num_classes)
    jobs = [j for j in shadow_bank_jobs(cfg, task, specs) if j.spec.kind == "convnet"]
    rows: list[dict[str, object]] = []
    # one-off costs (library loading, first primitives) are paid before any timing
    _timed_job(dataclasses.replace(jobs[0], config=_short(jobs[0].config)), torch_pooling=True)
    _timed_job(dataclasses.replace(jobs[0], config=_short(jobs[0].config)), torch_pooling=False)
    for i, algo in enumerate(cfg.algorithms):
        job = next(j for j in jobs if j.config.name == algo)
        # alternate which version runs first, so neither always runs warm
        order = (True, False) if i % 2 == 0 else (False, True)
        runs = {flag: _timed_job(job, torch_pooling=flag) for flag in order}
        (before, torch_s), (after, product_s) = runs[True], runs[False]
        diff = (before.release.images - after.release.images).abs().max()
        row = {
            "dataset": dataset,
            "algorithm": algo,
            "first": "avg_pool2d" if order[0] else "product",
            "avg_pool2d_s": torch_s,
            "product_s": product_s,
            "speedup": torch_s / product_s,
            "max_abs_pixel_diff": float(diff),
        }
        rows.append(row)
        print(row, flush=True)
    return rows


def _short(config: Any) -> Any:
    return dataclasses.replace(config, iterations=1)


def _timed_job(job: DistillJob, *, torch_pooling: bool) -> tuple[DistillationRun, float]:
    """The job distilled (not cached) with torch's pooling or the product, and its seconds."""
    undo = _with_torch_pooling() if torch_pooling else (lambda: None)
    try:
        t = time.perf_counter()
        run = job.run(None)
        return run, time.perf_counter() - t
    finally:
        undo()


def _markdown(result: dict[str, object]) -> str:
    lines = [
        "# 2x2 average pooling: matrix product against avg_pool2d",
        "",
        f"One thread, torch {result['torch']}; median microseconds (avg_pool2d / product);",
        "speedup = avg_pool2d / product.",
        "",
        "| shape | forward | fwd+bwd | double backward | max abs diff |",
        "|---|---|---|---|---|",
    ]
    for r in result["ops"]:  # type: ignore[attr-defined]
        cells = [
            f"{r[f'avg_pool2d_{p}_us']:.0f} / {r[f'product_{p}_us']:.0f} ({r[f'{p}_speedup']:.1f}x)"
            for p in ("forward", "fwd_bwd", "double")
        ]
        lines.append(f"| {tuple(r['shape'])} | {' | '.join(cells)} | {r['max_abs_diff']:.1e} |")
    if result.get("distillations"):
        lines += [
            "",
            f"ConvNet distillations of distillation-leakage on {result['dataset']}",
            "(first shadow half), seconds with avg_pool2d / with the product:",
            "",
            "| algorithm | first | avg_pool2d s | product s | speedup | max abs pixel diff |",
            "|---|---|---|---|---|---|",
        ]
        for r in result["distillations"]:  # type: ignore[attr-defined]
            lines.append(
                f"| {r['algorithm']} | {r['first']} | {r['avg_pool2d_s']:.1f} | "
                f"{r['product_s']:.1f} | {r['speedup']:.2f}x | {r['max_abs_pixel_diff']:.1e} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--distillations", action="store_true")
    parser.add_argument("--dataset", choices=["digits", "cifar10"], default="digits")
    parser.add_argument("--data-dir", default=None, help="data root (default: $TRAINLEAK_DATA)")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result: dict[str, object] = {
        "torch": torch.__version__,
        "dataset": args.dataset,
        "ops": _op_rows(),
    }
    if args.distillations:
        result["distillations"] = _distillation_rows(args.dataset, args.data_dir)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "pooling" if args.dataset == "digits" else f"pooling_{args.dataset}"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{stem}.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
