"""Benchmark: erasure decoding against imprint at fixed first-layer neuron budgets, one run.

For every neuron budget K in {64, 128, 256, 1024} and batch size B in {64, 128, 256} (MNIST,
float64 clients, the same batch for every method of a trial) it runs: erasure decoding with the
group count the server chooses for (B, K) (:func:`trainleak.systems.federated.design.
choose_groups`), erasure decoding with three groups forced (the former layout), and Robbing the
Fed's imprint with one group of the same neurons. Each is scored by the exact rate (max abs
error <= 1e-6 on [0, 1]); the density-evolution prediction is printed beside them.

Run: ``TRAINLEAK_DATA=../shared/data .venv/bin/python benchmarks/erasure_vs_imprint.py
[--trials 3]``; writes ``benchmarks/results/erasure_vs_imprint.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.scenarios.federated import active_cell
from trainleak.systems.federated.data import load_pool
from trainleak.systems.federated.design import choose_groups, predicted_recovery

OUT = Path(__file__).resolve().parent / "results"
NEURONS = (64, 128, 256, 1024)
BATCHES = (64, 128, 256)


def cells(trials: int, data_dir: str | None) -> list[dict[str, Any]]:
    """One row per (K, B, trial): chosen-group erasure, 3-group erasure and imprint rates."""
    pool = load_pool("mnist", n_public=1000, data_dir=data_dir)
    rows = []
    for k in NEURONS:
        for b in BATCHES:
            for t in range(trials):
                chosen, imprint = active_cell(pool, b, neurons=k, n_groups=None, seed=t)
                forced, imprint3 = active_cell(pool, b, neurons=k, n_groups=3, seed=t)
                rows.append(
                    {
                        "neurons": k,
                        "B": b,
                        "trial": t,
                        "groups": chosen["groups"],
                        "erasure": chosen["exact_rate"],
                        "erasure_certified": chosen["certified_fraction"],
                        "imprint": imprint["exact_rate"],
                        "erasure_3_groups": forced["exact_rate"],
                        "imprint_3_group_neurons": imprint3["exact_rate"],
                        "neurons_3_groups": forced["neurons"],
                        "predicted": predicted_recovery(b, k, chosen["groups"]),
                        "false_certificates": chosen["false_certificates"]
                        + forced["false_certificates"],
                    }
                )
    return rows


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def markdown(res: dict[str, Any]) -> str:
    """The results as a Markdown page."""
    rows = res["rows"]
    lines = [
        "# Erasure decoding against imprint at a fixed neuron budget",
        "",
        f"Command: `{res['command']}`; {res['machine']}; {res['seconds']:.0f} s in all; "
        f"{res['trials']} trial(s) per cell (mean exact rate). MNIST, float64 clients.",
        "",
        "| neurons | B | groups chosen | predicted | erasure (chosen) | imprint (1 group) | "
        "erasure - imprint (worst trial) | erasure, 3 groups forced | imprint, same neurons |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in NEURONS:
        for b in BATCHES:
            c = [r for r in rows if r["neurons"] == k and r["B"] == b]
            worst = min(r["erasure"] - r["imprint"] for r in c)
            lines.append(
                f"| {k} | {b} | {c[0]['groups']} | {c[0]['predicted']:.3f} | "
                f"{_mean(c, 'erasure'):.3f} | {_mean(c, 'imprint'):.3f} | {worst:+.3f} | "
                f"{_mean(c, 'erasure_3_groups'):.3f} | {_mean(c, 'imprint_3_group_neurons'):.3f} |"
            )
    lines += [
        "",
        f"Cells where erasure (chosen groups) fell below imprint in some trial: "
        f"**{res['cells_below_imprint']}**; false certificates: **{res['false_certificates']}**.",
        "",
        "With three groups forced, erasure falls below imprint wherever the load B / K is above "
        "the 3-uniform 2-core threshold (about 0.82): each group then has a third of the bins, "
        "so fewer single-sample bins seed the peeling than one group of K bins isolates. The "
        "server's choice (density evolution, `systems/federated/design.py`) uses one group "
        "there, where erasure decoding reads exactly imprint's bins.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    rows = cells(args.trials, args.data_dir)
    res: dict[str, Any] = {
        "command": f"python benchmarks/erasure_vs_imprint.py --trials {args.trials}",
        "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
        "1 thread",
        "trials": args.trials,
        "rows": rows,
        "chosen_groups": {f"{k},{b}": choose_groups(b, k) for k in NEURONS for b in BATCHES},
        "cells_below_imprint": sum(r["erasure"] < r["imprint"] for r in rows),
        "false_certificates": sum(int(r["false_certificates"]) for r in rows),
        "seconds": time.perf_counter() - start,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "erasure_vs_imprint.json").write_text(json.dumps(res, indent=1, default=float))
    (OUT / "erasure_vs_imprint.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
