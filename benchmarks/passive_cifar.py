"""Benchmark: passive erasure decoding on trained MLPs with wide first layers, CIFAR-10 images.

The seed's regime (seed 5, passive mode): high-dimensional inputs (the CIFAR-10 images under the
data root, d = 3072) and wide first layers (1024 and 4096 neurons), honestly trained on the
server's public images by SGD to the accuracy stated in the table (measured on held-out private
images), then one FedSGD gradient (float64 client) of a private batch of B images. Scored by the
exact rate (max abs error <= 1e-6 on [0, 1], :func:`score_exact_recovery`) and the attack's
wall time over the client's gradient time on the same batch.

Run: ``TRAINLEAK_DATA=../shared/data nice .venv/bin/python benchmarks/passive_cifar.py
[--widths 1024 4096] [--batches 8 16 32 64 128 512] [--steps 500] [--lr 0.01]``; writes
``benchmarks/results/passive_cifar.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks.gradient.erasure import ErasureDecodingPassive
from trainleak.models import build_model, model_spec
from trainleak.models.functional import instantiate
from trainleak.models.spec import ModelSpec, StateDict
from trainleak.scenarios.federated import passive_cell
from trainleak.systems.federated.data import Pool, load_pool
from trainleak.systems.training import TrainConfig, train

OUT = Path(__file__).resolve().parent / "results"
AIM_B64 = 0.9
AIM_TIME_RATIO = 10.0


def trained(pool: Pool, width: int, steps: int, lr: float) -> tuple[ModelSpec, StateDict]:
    """An honest MLP ``3072 -> width -> 10`` trained by SGD (momentum 0.9, mini-batches of 64)
    on the server's public images; float64 parameters for the client."""
    spec = model_spec("mlp", input_shape=pool.input_shape, hidden=[width], out_dim=pool.n_classes)
    model = build_model(spec, seed=0)
    if steps > 0:
        cfg = TrainConfig(
            optimizer="sgd",
            lr=lr,
            momentum=0.9,
            steps=steps,
            batch_size=64,
            loss="cross_entropy",
            seed=0,
        )
        train(model, pool.public_x, pool.public_y, cfg)
    return spec, {k: v.detach().double() for k, v in model.state_dict().items()}


def active_rate(params: StateDict, pool: Pool, n: int = 500) -> float:
    """Mean fraction of first-layer neurons a held-out image activates."""
    x = pool.x[-n:].reshape(n, -1).double()
    pre = x @ params["layers.0.weight"].T + params["layers.0.bias"]
    return float((pre > 0).double().mean())


def accuracy(spec: ModelSpec, params: StateDict, pool: Pool, n: int = 1000) -> float:
    """Accuracy on the last ``n`` private images (never drawn as batches below, see ``main``)."""
    model = instantiate(spec, params)
    x, y = pool.x[-n:], pool.y[-n:]
    with torch.no_grad():
        pred = model(x.to(next(model.parameters()).dtype)).argmax(1)
    return float((pred == y).double().mean())


def held_in(pool: Pool, n: int = 1000) -> Pool:
    """The pool without its last ``n`` private images (kept for the accuracy)."""
    return Pool(pool.name, pool.public_x, pool.x[:-n], pool.y[:-n], pool.n_classes, pool.public_y)


def grid(
    pool: Pool,
    widths: list[int],
    steps: list[int],
    batches: list[int],
    trials: int,
    lr: float,
) -> list[dict[str, Any]]:
    """One row per (width, training steps, B, trial)."""
    rows = []
    eval_pool = held_in(pool)
    for w in widths:
        for s in steps:
            t0 = time.perf_counter()
            spec, params = trained(pool, w, s, lr)
            acc, rate = accuracy(spec, params, pool), active_rate(params, pool)
            train_s = time.perf_counter() - t0
            print(f"width {w} steps {s}: accuracy {acc:.3f}, active {rate:.3f} ({train_s:.0f} s)")
            for b in batches:
                for t in range(trials):
                    attack = [ErasureDecodingPassive()]
                    for r in passive_cell(eval_pool, spec, params, b, attack, seed=t):
                        row = {**r, "width": w, "train_steps": s, "accuracy": acc}
                        row.update(trial=t, active_rate=rate, train_lr=lr)
                        rows.append({k: v for k, v in row.items() if _plain(v)})
                        print(json.dumps(rows[-1]), flush=True)
    return rows


def _took(meta: dict[str, Any]) -> str:
    if meta.get("from_log"):
        return f"rebuilt from the printed rows of `{meta['from_log']}`"
    return f"{meta['seconds']:.0f} s in all"


def _plain(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool)) or v is None


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(float(r[key]) for r in rows) / len(rows) if rows else float("nan")


def to_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """Exact rate per (width, steps) and B, then the time ratios."""
    sizes = sorted({r["B"] for r in rows})
    lines = [
        "# Passive erasure decoding on trained MLPs, CIFAR-10 images (d = 3072)",
        "",
        f"Command: `{meta['command']}`; {meta['machine']}, torch {meta['torch']}, "
        f"load average at start {meta['load']}; {_took(meta)}. "
        f"Aim: exact rate >= {AIM_B64} at B = 64; attack / client time <= {AIM_TIME_RATIO}.",
        "",
        "## Exact rate (max abs error <= 1e-6)",
        "",
        "| width | SGD steps | held-out accuracy | active fraction | "
        + " | ".join(f"B={b}" for b in sizes)
        + " |",
        "|---" * (4 + len(sizes)) + "|",
    ]
    keys = sorted({(r["width"], r["train_steps"]) for r in rows})
    for w, s in keys:
        sel = [r for r in rows if (r["width"], r["train_steps"]) == (w, s)]
        cells = [f"{_mean([r for r in sel if r['B'] == b], 'exact_rate'):.3f}" for b in sizes]
        head = f"| {w} | {s} | {sel[0]['accuracy']:.3f} | {sel[0]['active_rate']:.3f} | "
        lines.append(head + " | ".join(cells) + " |")
    lines += [
        "",
        "## Attack time over the client's gradient time",
        "",
        "| width | SGD steps | " + " | ".join(f"B={b}" for b in sizes) + " |",
        "|---" * (2 + len(sizes)) + "|",
    ]
    for w, s in keys:
        sel = [r for r in rows if (r["width"], r["train_steps"]) == (w, s)]
        cells = [
            f"{_mean([r for r in sel if r['B'] == b], 'time_ratio'):.1f} "
            f"({_mean([r for r in sel if r['B'] == b], 'attack_s'):.2f} s)"
            for b in sizes
        ]
        lines.append(f"| {w} | {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--steps", type=int, nargs="+", default=[500])
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 16, 32, 64, 128, 512])
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01, help="SGD learning rate of the training")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="passive_cifar")
    ap.add_argument(
        "--from-log", default=None, help="rebuild the results from the JSON rows a run printed"
    )
    args = ap.parse_args()
    start = time.time()
    load = Path("/proc/loadavg").read_text().split()[0]
    if args.from_log:
        lines = Path(args.from_log).read_text().splitlines()
        rows = [json.loads(ln) for ln in lines if ln.startswith("{")]
        load = "not recorded (rebuilt from the run's log)"
    else:
        pool = load_pool("cifar10", n_public=1000, data_dir=args.data_dir)
        rows = grid(pool, args.widths, args.steps, args.batches, args.trials, args.lr)
    meta = {
        "command": "python benchmarks/passive_cifar.py --widths "
        + " ".join(map(str, args.widths))
        + " --steps "
        + " ".join(map(str, args.steps))
        + " --batches "
        + " ".join(map(str, args.batches))
        + f" --trials {args.trials} --lr {args.lr}",
        "machine": platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load": load,
        "seconds": time.time() - start,
        "device": "cpu",
        "from_log": args.from_log,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / f"{args.out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (OUT / f"{args.out}.md").write_text(to_markdown(rows, meta))
    print(to_markdown(rows, meta))


if __name__ == "__main__":
    main()
