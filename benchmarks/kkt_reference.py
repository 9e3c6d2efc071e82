"""Benchmark: the KKT attack's settings, side by side with Haim et al.'s reference code.

On one released checkpoint (the one ``benchmarks/kkt_mnist.py`` trains for evaluation seed 0:
MNIST odd/even, 100 images, 784-1000-1, init 0.001, 30,000 GD steps; or the digits demo of
``trainleak run kkt-reconstruction``) it runs the KKT attack with several named settings at
the same candidates and iterations, and scores each with the experiment's own metric (SSIM
after NCC matching, specificity). The settings form an ablation between trainleak's former
experiment defaults and the reference's published MNIST hyper-parameters (Haim, Vardi,
Yehudai, Shamir & Irani, NeurIPS 2022; ``nivha/dataset_reconstruction``,
``reconstruct_mnist_rbijxft7_args.txt``). The reference code itself is not run here: its
figures on the same checkpoint, measured in issue 11, are printed beside the table.

Usage:
    python benchmarks/kkt_reference.py --dataset mnist --candidates 200 --steps 1000
        [--configs NAME ...] [--cache DIR]

Each invocation adds its rows to ``benchmarks/results/kkt_reference.json`` (keyed by data
set, candidates and steps) and rewrites ``kkt_reference.md`` from all rows.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks.checkpoint.kkt import ADAM_FIT, KKTReconstruction
from trainleak.experiments._kkt_common import load_task, score
from trainleak.experiments.kkt_reconstruction import KKTConfig, _train
from trainleak.releases import Checkpoint

OUT = Path(__file__).resolve().parent / "results"
# The attack's defaults before issue 11 (ADAM_FIT with gate 150).
OLD = ADAM_FIT | {"relu_alpha": 150.0}
REF = {
    "optimizer": "sgd",
    "momentum": 0.9,
    "lr_x": 0.282,
    "lr_lambda": 1e-4,
    "lambda_min": 0.415,
    "relu_alpha": 19.2,
    "init_std": 0.00174,
    "multiplier_scale": "mean",
    "residual": "absolute",
    "bound_weight": 1.0,
    "lambda_weight": 5.0,
}
# The attack's defaults from issue 11 until the follow-up (Adam, gate 19.2).
PREV = OLD | {"relu_alpha": 19.2}
# The attack's defaults now: the reference's SGD parametrisation with multiplier learning rate
# 0.01, re-expressed on the relative residual: learning rates times, penalty weights divided
# by, the mnist checkpoint's ||theta||^2 = 23.1, so that on that checkpoint it takes the steps
# of ``ref, multiplier lr 0.01`` and elsewhere steps scaled by 23.1 / ||theta||^2.
NEW = {
    "optimizer": "sgd",
    "momentum": 0.9,
    "lr_x": 6.5,
    "lr_lambda": 0.23,
    "lambda_min": 0.415,
    "relu_alpha": 19.2,
    "init_std": 0.00174,
    "bound_weight": 0.043,
    "lambda_weight": 0.22,
    "multiplier_scale": "mean",
    "residual": "relative",
}
CONFIGS: dict[str, dict[str, Any]] = {
    "former experiment default (adam)": OLD,
    "former default, gate 19.2": OLD | {"relu_alpha": 19.2},
    "former default, init 0.00174": OLD | {"init_std": 0.00174},
    "former default, lr 0.003": OLD | {"lr_x": 0.003},
    "former default, multiplier lr 1e-4": OLD | {"lr_lambda": 1e-4},
    "former default, mean scale, lambda_min 0.415": OLD
    | {"multiplier_scale": "mean", "lambda_min": 0.415},
    "issue-11 default": PREV,
    "issue-11 default, gate 5": PREV | {"relu_alpha": 5.0},
    "issue-11 default, gate 10": PREV | {"relu_alpha": 10.0},
    "issue-11 default, gate 40": PREV | {"relu_alpha": 40.0},
    "issue-11 default, multiplier lr 1e-4": PREV | {"lr_lambda": 1e-4},
    "issue-11 default, cosine lr": PREV | {"lr_schedule": "cosine"},
    "issue-11 default, lr 0.03": PREV | {"lr_x": 0.03},
    "issue-11 default, lr 0.03, cosine lr": PREV | {"lr_x": 0.03, "lr_schedule": "cosine"},
    "issue-11 default, multiplier lr 0.1, cosine lr": PREV
    | {"lr_lambda": 0.1, "lr_schedule": "cosine"},
    "default": NEW,
    "reference settings": REF,
    "ref, fitted multiplier scale": REF | {"multiplier_scale": "fit"},
    "ref, relative residual": REF | {"residual": "relative"},
    "ref, gate 150": REF | {"relu_alpha": 150.0},
    "ref, init 0.03": REF | {"init_std": 0.03},
    "ref, lambda_min 0.05": REF | {"lambda_min": 0.05},
    "ref, multiplier lr 0.01": REF | {"lr_lambda": 0.01},
    "ref, adam lr 0.01": REF | {"optimizer": "adam", "lr_x": 0.01},
    "ref, no momentum": REF | {"momentum": 0.0},
    "ref, cosine lr": REF | {"lr_schedule": "cosine"},
}
CHECKPOINTS = {
    "mnist": {"pool": "evaluation", "init_scale": 0.001, "train_steps": 30000},
    "digits": {"pool": "all", "init_scale": 0.03, "train_steps": 20000},
}
# Issue 11: reference code and trainleak's former default on the mnist checkpoint, 200
# candidates, 5000 iterations, scored with trainleak's metric (SSIM>=0.4, >=0.6, median).
PUBLISHED = {
    "reference code (Haim et al.), issue 11": (78, 16, 0.478),
    "trainleak former default, issue 11": (30, 1, 0.330),
    "trainleak former default + gate 19.2, issue 11": (36, 2, None),
}
# Measured here, outside the repository: a scratch mirror of the reference's extraction loop
# (written from reading it; custom-gradient gate, SGD momentum 0.9 on candidates and
# multipliers, its published MNIST settings) on the mnist checkpoint, 200 candidates, seed 0.
MIRROR = "1000 iterations: 27 / 0 / 0.368, specific 2 (250: 10 / 0 / 0.330; 500: 20 / 0 / 0.349)"

# Measured with a scratch script outside the repository (the attack's loop on the mnist
# checkpoint, seed 0, 200 candidates, scored at intermediate iterations of one constant-rate
# run; its 1000- and 5000-iteration points equal the table's rows within 2 images).
TRAJECTORY = (
    "issue-11 default (Adam), SSIM>=0.4 at 250 / 500 / 1000 / 2000 / 3000 / 4000 / 5000 "
    "iterations: 20 / 35 / 38 / 34 / 38 / 42 / 39, KKT residual 0.024 / 0.0086 / 0.0043 / "
    "0.0025 / 0.0019 / 0.0018 / 0.0015; reference settings: 10 / 21 / 29 / 44 / 43 / 45 / 45, "
    "residual 0.34 / 0.24 / 0.16 / 0.093 / 0.070 / 0.057 / 0.048. Adam with multiplier lr 0.1: "
    "31 / 29 at 500 / 1000; Adam with lambda_min 0.4: 27 / 31 (4 / 5 at SSIM>=0.6). On the "
    "digits checkpoint, 3000 iterations: reference settings with multiplier lr 0.01 and lr "
    "0.094 (0.282 x 23.1 / 71.6, its ||theta||^2): 100 / 81 / specific 25 (1000: 72, 2000: "
    "80); with multiplier lr 0.03: 100 / 62. Attack seed 1 on the mnist checkpoint (SSIM>=0.4 "
    "/ >=0.6 / specific): default 30 / 0 / 3 at 1000, 53 / 6 / 16 at 5000 iterations; reference "
    "settings 24 / 0 / 2 and 44 / 4 / 12"
)


def checkpoint(dataset: str, cache: Path, data_dir: str | None) -> tuple[Checkpoint, Any]:
    """The released checkpoint (trained once, then read from ``cache``) and its task."""
    c = CHECKPOINTS[dataset]
    task = load_task(dataset, per_class=50, seed=0, split_seed=0, pool=c["pool"], data_dir=data_dir)
    path = cache / f"{dataset}_{c['pool']}_{c['init_scale']}_{c['train_steps']}"
    if (path / "weights.safetensors").is_file():
        return Checkpoint.load(path), task
    cfg = KKTConfig(
        dataset=dataset,
        per_class=50,
        hidden=[1000],
        pool=c["pool"],
        **{k: c[k] for k in ("init_scale", "train_steps")},
    )
    ckpt, _ = _train(cfg, task.model_x, task.y, 0, None)
    ckpt.save(path)
    return ckpt, task


def check_default() -> None:
    """``default`` must be the attack's defaults (its rows are labelled so)."""
    attack = KKTReconstruction()
    differ = {k: v for k, v in NEW.items() if getattr(attack, k) != v}
    if differ:
        raise SystemExit(f"NEW differs from KKTReconstruction's defaults: {differ}")


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    check_default()
    ckpt, task = checkpoint(args.dataset, args.cache, args.data_dir)
    rows = []
    for name in args.configs or list(CONFIGS):
        hp = CONFIGS[name]
        attack = KKTReconstruction(
            n_candidates=args.candidates,
            steps=args.steps,
            log_every=args.steps,
            device=args.device,
            **hp,
        )
        start = time.perf_counter()
        rec = attack(ckpt, task.knowledge(), seed=0)
        s = score(task, task.to_image_space(rec.inputs))
        row = {
            "dataset": args.dataset,
            "candidates": args.candidates,
            "steps": args.steps,
            "config": name,
            "settings": {**hp},
            "ssim_04": s.ssim_04,
            "ssim_06": s.ssim_06,
            "median_ssim": s.median_ssim,
            "specific": s.specific,
            "kkt_residual": rec.diagnostics["kkt_loss_final"],
            "seconds": time.perf_counter() - start,
            "device": args.device,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def markdown(rec: dict[str, Any]) -> str:
    """All stored rows as Markdown, one table per (data set, candidates, steps)."""
    lines = [
        "# KKT attack settings against Haim et al.'s reference code",
        "",
        "Checkpoints: `mnist` is the one `benchmarks/kkt_mnist.py` trains for evaluation seed 0 "
        "(100 MNIST odd/even images, 784-1000-1, init 0.001, 30,000 GD steps); `digits` is the "
        "default demo of `trainleak run kkt-reconstruction` (100 images, 64-1000-1, init 0.03, "
        "20,000 GD steps). Scores: SSIM after NCC matching and specificity, as in the "
        "experiment. Wall seconds per row on the device named in its row (`cpu`: a shared "
        "two-core machine, load varies between rows; `cuda`: one H200 GPU). "
        "`default` is the attack's default since the follow-up of issue 11 (the reference's "
        "SGD parametrisation, multiplier learning rate 0.01, on the relative residual with "
        "learning rates scaled by 23.1, the mnist checkpoint's ||theta||^2); `issue-11 "
        "default` is the default before it (`former default, gate 19.2`: Adam, fitted "
        "multiplier scale), which the kkt-reconstruction experiment and assessments keep.",
        "",
        "Reference code on the mnist checkpoint, 200 candidates, 5000 iterations (issue 11, "
        "not rerun here): "
        + "; ".join(
            f"{k}: {a} / {b} / {'n/a' if c is None else c}" for k, (a, b, c) in PUBLISHED.items()
        )
        + " (SSIM>=0.4 / SSIM>=0.6 / median).",
        "",
        "A scratch mirror of the reference's extraction loop (written from reading it, run "
        f"outside the repository) on the same mnist checkpoint, 200 candidates: {MIRROR}. "
        "It agrees with the attack under `reference settings` below; the issue's 78 at 1000 "
        "iterations did not reproduce on this checkpoint.",
        "",
        f"Trajectories (why the issue-11 default plateaus): {TRAJECTORY}.",
        "",
    ]
    keys = dict.fromkeys((r["dataset"], r["candidates"], r["steps"]) for r in rec["rows"])
    for dataset, cands, steps in keys:
        rows = [
            r
            for r in rec["rows"]
            if (r["dataset"], r["candidates"], r["steps"]) == (dataset, cands, steps)
        ]
        lines += [
            f"## {dataset}: {cands} candidates, {steps} iterations",
            "",
            f"Command: `python benchmarks/kkt_reference.py --dataset {dataset} --candidates "
            f"{cands} --steps {steps}`",
            "",
            "| settings | SSIM>=0.4 | SSIM>=0.6 | median SSIM | specific | KKT residual | s "
            "| device |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['config']}{' *' if r.get('source') else ''} | {r['ssim_04']} | "
            f"{r['ssim_06']} | {r['median_ssim']:.3f} | "
            f"{r['specific']} | {r['kkt_residual']:.3g} | {r['seconds']:.0f} | "
            f"{r.get('device', 'cpu')} |"
            for r in rows
        ]
        lines += ["", *verdict(rows), ""]
    lines += ["Settings of each row: see `settings` in kkt_reference.json."]
    if any(r.get("source") for r in rec["rows"]):
        lines.append(
            "Rows marked * were measured by an earlier scratch version of this script (same "
            "checkpoint, attack, seed and score functions; `source` in the JSON)."
        )
    lines.append("")
    return "\n".join(lines)


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    """Default against the reference settings on the same rows (newest row of each setting)."""
    last = {r["config"]: r for r in rows}
    ref, new = last.get("reference settings"), last.get("default")
    if ref is None or new is None:
        return []
    best = max(
        (r for r in last.values() if r["config"] != "reference settings"),
        key=lambda r: (r["ssim_04"], r["ssim_06"]),
    )
    at_least = new["ssim_04"] >= ref["ssim_04"] and new["ssim_06"] >= ref["ssim_06"]
    prev = last.get("issue-11 default")
    trade = (
        []
        if prev is None
        else [
            f"Default against the issue-11 default (Adam): {new['ssim_04']} / "
            f"{new['ssim_06']} / {new['specific']} against {prev['ssim_04']} / "
            f"{prev['ssim_06']} / {prev['specific']}."
        ]
    )
    return [
        f"Default against reference settings (SSIM>=0.4 / >=0.6 / specific): "
        f"{new['ssim_04']} / {new['ssim_06']} / {new['specific']} against "
        f"{ref['ssim_04']} / {ref['ssim_06']} / {ref['specific']}: default at least as strong "
        f"on both SSIM counts: **{'yes' if at_least else 'NO'}**. Most images at SSIM>=0.4: "
        f"`{best['config']}` ({best['ssim_04']} / {best['ssim_06']} / {best['specific']}).",
        *trade,
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=list(CHECKPOINTS), default="mnist")
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--configs", nargs="*", choices=list(CONFIGS))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/trainleak_kkt_reference"))
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--device", default="cpu", help="torch device of the attack (cpu, cuda)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = run(args)
    path = OUT / "kkt_reference.json"
    rec = json.loads(path.read_text()) if path.is_file() else {"rows": []}

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["dataset"], r["candidates"], r["steps"], r["config"], r.get("device", "cpu"))

    done = {key(r) for r in rows}
    rec["rows"] = [r for r in rec["rows"] if key(r) not in done] + rows
    rec["machine"] = {"python": platform.python_version(), "torch": torch.__version__}
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1))
    (OUT / "kkt_reference.md").write_text(markdown(rec))


if __name__ == "__main__":
    main()
