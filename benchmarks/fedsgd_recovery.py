"""Benchmark: exact FedSGD batch recovery (seed 5) against its yardsticks, in one process.

Writes ``benchmarks/results/fedsgd_recovery.json`` and ``.md``. Every comparison is run side by
side here (same batches, same machine): erasure decoding vs single-group imprint with the same
first-layer neurons, passive decoding per training level, Inverting Gradients' PSNR against
iterations, attack time over client time, and the effect of release-time defenses.

Run: ``TRAINLEAK_DATA=../shared/data .venv/bin/python benchmarks/fedsgd_recovery.py [--quick]``

``--parts timing`` reruns only the attack-time table (``benchmarks/results/fedsgd_timing.{json,md}``
, or ``fedsgd_timing_<label>`` with ``--label``): per batch, the median of repeated warm runs of
the erasure attack over the median of repeated warm client steps, in one process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks.gradient.erasure import ErasureDecodingActive, ErasureDecodingPassive
from trainleak.attacks.gradient.imprint import ImprintAttack
from trainleak.attacks.gradient.inverting import InvertingGradients
from trainleak.defenses import chain
from trainleak.defenses.gradient import ClipNorm, GaussianNoise, Quantize
from trainleak.metrics.exact_recovery import score_exact_recovery
from trainleak.models.functional import batch_gradient, instantiate
from trainleak.releases import Knowledge
from trainleak.scenarios.federated import active_cell, passive_cell, trained_mlp
from trainleak.systems.federated import fedsgd_update
from trainleak.systems.federated.data import Pool, load_pool
from trainleak.systems.federated.malicious import malicious_mlp

OUT = Path(__file__).resolve().parent / "results"
BREACHING_IMPRINT_128 = 0.359  # reference-runs.md: 128 bins, MNIST, B = 128, exact


def mean(rows: list[dict[str, Any]], key: str, **where: Any) -> float:
    vals = [r[key] for r in rows if all(r.get(k) == v for k, v in where.items())]
    return sum(vals) / len(vals) if vals else float("nan")


def active_vs_batch(pool: Pool, sizes: list[int], trials: int) -> list[dict[str, Any]]:
    """2B neurons (3 groups) vs imprint with the same neurons, per batch size."""
    rows = []
    for b in sizes:
        for t in range(trials):
            rows += active_cell(pool, b, neurons=2 * b, n_groups=3, seed=t)
    return rows


def fixed_neurons(pool: Pool, neurons: list[int], trials: int) -> list[dict[str, Any]]:
    """B = 128 against 128, 256 and 1024 first-layer neurons (erasure: the server's group
    count, ``systems.federated.design.choose_groups``)."""
    rows = []
    for m in neurons:
        for t in range(trials):
            rows += [
                {**r, "neurons_target": m}
                for r in active_cell(pool, 128, neurons=m, n_groups=None, seed=t)
            ]
    return rows


def passive(pool: Pool, steps: list[int], sizes: list[int], trials: int) -> list[dict[str, Any]]:
    rows = []
    for s in steps:
        spec, params = trained_mlp(pool, width=1024, steps=s)
        for b in sizes:
            for t in range(trials):
                rows += [
                    {**r, "train_steps": s}
                    for r in passive_cell(pool, spec, params, b, [ErasureDecodingPassive()], seed=t)
                ]
    return rows


def inverting_curve(pool: Pool, iterations: int, batch: int) -> list[dict[str, Any]]:
    """PSNR of Inverting Gradients' iterate against iterations, and its time per iteration."""
    spec, params = trained_mlp(pool, width=1024, steps=100, dtype=torch.float32)
    gen = torch.Generator().manual_seed(5)
    x, y = pool.batch(batch, gen)
    upd = fedsgd_update(spec, params, x, y)
    kn = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0))
    step = max(iterations // 8, 1)
    rec = InvertingGradients(iterations=iterations, snapshot_every=step, log_every=iterations)(
        upd, kn
    )
    rows = []
    for it, snap in rec.diagnostics["snapshots"]:
        s = score_exact_recovery(x, y, rec.__class__(inputs=snap))
        rows.append(
            {
                "B": batch,
                "iterations": it,
                "psnr": s.mean_psnr,
                "s_per_iteration": rec.seconds / iterations,
            }
        )
    return rows


DEFENSES: list[tuple[str, Any]] = [
    ("none", None),
    ("gaussian noise 1e-8 (relative)", GaussianNoise(1e-8, relative=True)),
    ("gaussian noise 1e-3 (relative)", GaussianNoise(1e-3, relative=True)),
    ("clip to norm 1e-2", ClipNorm(1e-2)),
    ("float16", Quantize(16, "half")),
    ("8-bit", Quantize(8)),
    ("clip 1e-2 + noise 1e-3", chain(ClipNorm(1e-2), GaussianNoise(1e-3, relative=True))),
]


def _defended(
    attack: Any, clean: Any, kn: Knowledge, x: torch.Tensor, y: torch.Tensor
) -> list[dict[str, Any]]:
    rows = []
    for name, d in DEFENSES:
        upd = clean if d is None else d(clean, torch.Generator().manual_seed(0))
        s = score_exact_recovery(x, y, attack(upd, kn))
        rows.append({"attack": attack.name, "defense": name, "B": len(x), **s.as_dict()})
    return rows


def defenses(pool: Pool) -> list[dict[str, Any]]:
    """Each defense against every attack: active ones at B = 128 through 258 neurons, passive
    decoding at B = 16 and Inverting Gradients at B = 1 on an honest untrained MLP."""
    gen = torch.Generator().manual_seed(11)
    x, y = pool.batch(128, gen)
    x = x.double()
    kn = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0), active=True)
    rows = []
    for groups, per, attack in ((3, 86, ErasureDecodingActive()), (1, 258, ImprintAttack())):
        spec, params = malicious_mlp(
            pool.input_shape, 10, pool.public_x, n_groups=groups, bins_per_group=per
        )
        rows += _defended(attack, fedsgd_update(spec, params, x, y), kn, x, y)
    spec, params = trained_mlp(pool, width=1024, steps=0)
    honest = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0))
    rows += _defended(
        ErasureDecodingPassive(),
        fedsgd_update(spec, params, x[:16], y[:16]),
        honest,
        x[:16],
        y[:16],
    )
    ig = InvertingGradients(iterations=300, log_every=300)
    rows += _defended(ig, fedsgd_update(spec, params, x[:1], y[:1]), honest, x[:1], y[:1])
    return rows


def _active_md(a: list[dict[str, Any]], f: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Active: 2B first-layer neurons (3 groups) vs imprint with the same neurons",
        "",
        "| B | erasure exact | certified | batch certified | imprint exact | ratio | "
        "attack / client time |",
        "|---|---|---|---|---|---|---|",
    ]
    for b in sorted({r["B"] for r in a}):
        e = mean(a, "exact_rate", B=b, attack="erasure-decoding-active")
        i = mean(a, "exact_rate", B=b, attack="imprint")
        lines.append(
            f"| {b} | {e:.3f} | {mean(a, 'certified_fraction', B=b, groups=3):.3f} | "
            f"{mean(a, 'batch_certified', B=b, groups=3):.2f} | {i:.3f} | "
            f"{e / max(i, 1e-9):.2f} | {mean(a, 'time_ratio', B=b, groups=3):.1f} |"
        )
    lines += [
        "",
        "## B = 128 with a fixed number of first-layer neurons",
        "",
        "| neurons | erasure (server's groups) | imprint (1 group) | erasure / breaching imprint "
        f"128 bins ({BREACHING_IMPRINT_128}) |",
        "|---|---|---|---|",
    ]
    for m in sorted({r["neurons_target"] for r in f}):
        e = mean(f, "exact_rate", neurons_target=m, attack="erasure-decoding-active")
        i = mean(f, "exact_rate", neurons_target=m, attack="imprint")
        lines.append(f"| {m} | {e:.3f} | {i:.3f} | {e / BREACHING_IMPRINT_128:.2f} |")
    return lines


def _other_md(
    p: list[dict[str, Any]], ig: list[dict[str, Any]], d: list[dict[str, Any]]
) -> list[str]:
    sizes = sorted({r["B"] for r in p})
    lines = [
        "",
        "## Passive decoding, honest MLP 784-1024-10 (exact rate)",
        "",
        "| SGD steps | " + " | ".join(f"B={b}" for b in sizes) + " |",
        "|---" * (1 + len(sizes)) + "|",
    ]
    for s in sorted({r["train_steps"] for r in p}):
        cells = [f"{mean(p, 'exact_rate', B=b, train_steps=s):.3f}" for b in sizes]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += ["", "## Inverting Gradients (honest MLP, 100 SGD steps, float32)", ""]
    lines += ["| B | iterations | PSNR dB | s / iteration |", "|---|---|---|---|"]
    lines += [
        f"| {r['B']} | {r['iterations']} | {r['psnr']:.2f} | {r['s_per_iteration']:.4f} |"
        for r in ig
    ]
    lines += ["", "## Release-time defenses against every attack", ""]
    lines += ["| attack | B | defense | exact | certified | false certificates | PSNR dB |"]
    lines += ["|---|---|---|---|---|---|---|"]
    lines += [
        f"| {r['attack']} | {r['B']} | {r['defense']} | {r['exact_rate']:.3f} | "
        f"{r['certified_fraction']:.3f} | {r['false_certificates']} | {r['mean_psnr']:.1f} |"
        for r in d
    ]
    return lines


def markdown(res: dict[str, Any]) -> str:
    """The results as a Markdown page."""
    head = [
        "# FedSGD exact batch recovery (seed 5)",
        "",
        f"Command: `{res['command']}`; {res['machine']}; {res['seconds']:.0f} s in all.",
        "Exact = max abs error <= 1e-6 on [0, 1]; float64 clients; MNIST.",
        "",
    ]
    body = _active_md(res["active"], res["fixed"])
    body += _other_md(res["passive"], res["inverting"], res["defenses"])
    tail = ["", f"False certificates over every run: **{res['false_certificates']}**.", ""]
    return "\n".join(head + body + tail)


def _median_seconds(fn: Any, repeats: int) -> tuple[float, float]:
    """Median wall and median CPU seconds of ``repeats`` calls of ``fn`` (after a warm-up).

    CPU seconds (this process's clock) are what a busy machine distorts least: wall time
    also counts the time other processes held the core.
    """
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def _timed_cell(
    attack: Any, update: Any, kn: Knowledge, x: torch.Tensor, y: torch.Tensor, repeats: int
) -> dict[str, Any]:
    """Attack seconds over the client's step on the same batch, both medians of warm runs.

    The client's step is what an honest client computes for this round: the forward pass,
    the mean cross-entropy and its backward pass to every parameter
    (:func:`~trainleak.models.functional.batch_gradient`), model already built, float64,
    one thread. The attack's time is the whole call, from the release to the certified
    reconstruction (its model built inside).
    """
    model = instantiate(update.architecture, update.parameters)
    xs = x.to(update.dtype)
    client, client_cpu = _median_seconds(lambda: batch_gradient(model, xs, y), 30)
    recs: list[Any] = []
    att, att_cpu = _median_seconds(lambda: recs.append(attack(update, kn)), repeats)
    s = score_exact_recovery(x, y, recs[-1])
    return {
        "attack": attack.name,
        "B": len(x),
        "exact_rate": s.exact_rate,
        "certified_fraction": s.certified_fraction,
        "false_certificates": s.false_certificates,
        "client_s": client,
        "attack_s": att,
        "client_cpu_s": client_cpu,
        "attack_cpu_s": att_cpu,
        "ratio": att / client,
        "cpu_ratio": att_cpu / client_cpu,
    }


def timing(pool: Pool, sizes: list[int], trials: int, repeats: int) -> list[dict[str, Any]]:
    """The active cells of ``active_vs_batch`` (2B neurons, 3 groups, same seeds and batches)
    and passive decoding on the honest 784-1024-10 MLP (0 and 100 SGD steps, B = 32)."""
    kn = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0), active=True)
    rows = []
    for b in sizes:
        for t in range(trials):
            x, y = pool.batch(b, torch.Generator().manual_seed(t * 7919 + b))
            x = x.double()
            spec, params = malicious_mlp(
                pool.input_shape, pool.n_classes, pool.public_x, n_groups=3,
                bins_per_group=-(-2 * b // 3), hidden=32, seed=t,
            )  # fmt: skip
            upd = fedsgd_update(spec, params, x, y)
            rows.append({**_timed_cell(ErasureDecodingActive(), upd, kn, x, y, repeats), "seed": t})
    honest = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0))
    for steps in (0, 100):
        spec, params = trained_mlp(pool, width=1024, steps=steps)
        for t in range(trials):
            x, y = pool.batch(32, torch.Generator().manual_seed(t * 7919 + 33))
            x = x.double()
            upd = fedsgd_update(spec, params, x, y)
            cell = _timed_cell(ErasureDecodingPassive(), upd, honest, x, y, repeats)
            rows.append({**cell, "seed": t, "train_steps": steps})
    return rows


def timing_markdown(res: dict[str, Any]) -> str:
    """The timing rows as a Markdown page."""
    lines = [
        "# Attack time over the client's update time (FedSGD, MNIST, float64, one thread)",
        "",
        f"Command: `{res['command']}`; {res['machine']}; load average (1 min) {res['load'][0]:.2f}"
        f" at start, {res['load'][1]:.2f} at end; {res['seconds']:.0f} s in all."
        + (f" {res['note']}" if res.get("note") else ""),
        "Client step: forward, mean cross-entropy and backward to every parameter of the "
        "same model on the same batch (median of 30 warm runs). Attack: the whole "
        f"erasure-decoding call, decoding and certificate (median of {res['repeats']} warm "
        "runs). CPU: this process's CPU clock; wall: elapsed time (inflated by other "
        "processes when the machine is loaded). Aim: ratio <= 10 at B = 128 and 512 (active).",
        "",
        "| attack | B | SGD steps | seed | exact | certified | false cert. | client CPU ms | "
        "attack CPU ms | CPU ratio | wall ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["timing"]:
        lines.append(
            f"| {r['attack']} | {r['B']} | {r.get('train_steps', '-')} | {r['seed']} | "
            f"{r['exact_rate']:.3f} | {r['certified_fraction']:.3f} | {r['false_certificates']} | "
            f"{1e3 * r['client_cpu_s']:.2f} | {1e3 * r['attack_cpu_s']:.1f} | "
            f"{r['cpu_ratio']:.1f} | {r['ratio']:.1f} |"
        )
    return "\n".join(lines + [""])


def run_timing(args: argparse.Namespace, pool: Pool) -> None:
    """``--parts timing``: the time table alone."""
    load0 = os.getloadavg()[0]
    start = time.perf_counter()
    sizes = [128] if args.quick else [128, 512]
    res: dict[str, Any] = {
        "command": "python benchmarks/fedsgd_recovery.py --parts timing"
        + (" --quick" if args.quick else "")
        + (f" --label {args.label}" if args.label else ""),
        "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
        "1 thread",
        "repeats": 1 if args.quick else 3,
        "note": args.note,
    }
    res["timing"] = timing(pool, sizes, 1 if args.quick else 3, res["repeats"])
    res["seconds"] = time.perf_counter() - start
    res["load"] = [load0, os.getloadavg()[0]]
    name = "fedsgd_timing" + (f"_{args.label}" if args.label else "")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(res, indent=1, default=float))
    (OUT / f"{name}.md").write_text(timing_markdown(res))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one trial, fewer sizes")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--parts", choices=["all", "timing"], default="all")
    ap.add_argument("--label", default="", help="suffix of the timing result files")
    ap.add_argument("--note", default="", help="a sentence for the timing page's header")
    args = ap.parse_args()
    torch.set_num_threads(1)
    trials = 1 if args.quick else 3
    start = time.perf_counter()
    pool = load_pool("mnist", n_public=1000, data_dir=args.data_dir)
    if args.parts == "timing":
        run_timing(args, pool)
        return
    res: dict[str, Any] = {
        "command": "python benchmarks/fedsgd_recovery.py" + (" --quick" if args.quick else ""),
        "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
        "1 thread",
        "active": active_vs_batch(pool, [16, 64, 128, 256, 512], trials),
        "fixed": fixed_neurons(pool, [128, 256, 1024], trials),
        "passive": passive(pool, [0, 100, 1000], [8, 16, 32, 64, 128], 1 if args.quick else 2),
        "inverting": inverting_curve(pool, 200 if args.quick else 1000, 1)
        + inverting_curve(pool, 200 if args.quick else 1000, 4),
        "defenses": defenses(pool),
    }
    res["false_certificates"] = sum(
        int(r["false_certificates"])
        for k in ("active", "fixed", "passive", "defenses")
        for r in res[k]
    )
    res["seconds"] = time.perf_counter() - start
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "fedsgd_recovery.json").write_text(json.dumps(res, indent=1, default=float))
    (OUT / "fedsgd_recovery.md").write_text(markdown(res))


if __name__ == "__main__":
    main()
