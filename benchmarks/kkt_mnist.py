"""Benchmark: KKT reconstruction on MNIST odd/even (issue: foundation acceptance run).

Runs the ``kkt-reconstruction`` experiment on MNIST (100 training images, 784-1000-1, GD) and
records, from this one run: the counts of training images recovered at SSIM >= 0.4 / 0.6, the
same counts for every baseline scored by the same code, the ratio attack / best baseline, and
the wall time of training and of reconstruction (with attack steps per second).

Usage:
    python benchmarks/kkt_mnist.py [--set key=value ...]

Writes ``benchmarks/results/kkt_mnist.json`` and ``benchmarks/results/kkt_mnist.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
import yaml

from trainleak.experiments import get_experiment

DEFAULTS = {
    "dataset": "mnist",
    "per_class": 50,
    "hidden": [1000],
    "init_scale": 0.001,
    "train_steps": 30000,
    "attack_steps": 10000,
}
OUT = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], help="config override key=value")
    args = parser.parse_args()
    overrides = dict(DEFAULTS)
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = yaml.safe_load(value)
    exp = get_experiment("kkt-reconstruction")
    cfg = exp.make_config(overrides)
    start = time.perf_counter()
    result = exp.run(cfg)
    wall = time.perf_counter() - start
    m = result.metrics
    raw = result.tables["raw (Haim et al. protocol)"]
    record = {
        "config": cfg.model_dump(),
        "wall_seconds": wall,
        "train_seconds": m["train_seconds"],
        "attack_seconds": m["attack_seconds"],
        "attack_steps_per_second": cfg.attack_steps / m["attack_seconds"],
        "metrics": m,
        "table": raw,
        "claims": [{"text": c.text, "holds": c.holds, **c.evidence} for c in result.claims],
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "kkt_mnist.json").write_text(json.dumps(record, indent=2, default=str))
    (OUT / "kkt_mnist.md").write_text(_markdown(record))
    print((OUT / "kkt_mnist.md").read_text())


def _markdown(rec: dict) -> str:
    lines = [
        "# KKT reconstruction on MNIST odd/even",
        "",
        f"Command: `python benchmarks/kkt_mnist.py` (config in kkt_mnist.json). "
        f"Training {rec['train_seconds']:.0f} s, reconstruction {rec['attack_seconds']:.0f} s "
        f"({rec['attack_steps_per_second']:.1f} attack steps/s), "
        f"{rec['machine']['threads']} torch threads.",
        "",
        "| method | SSIM>=0.4 | SSIM>=0.6 | median SSIM | mean top-10 SSIM |",
        "|---|---|---|---|---|",
    ]
    for row in rec["table"]:
        lines.append(
            f"| {row['method']} | {row['ssim>=0.4']} | {row['ssim>=0.6']} | "
            f"{row['median_ssim']:.3f} | {row['mean_top10_ssim']:.3f} |"
        )
    lines += ["", "Claims (computed from this run):", ""]
    for c in rec["claims"]:
        lines.append(f"- [{'holds' if c['holds'] else 'does NOT hold'}] {c['text']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
