"""Benchmark: DP-SGD reconstruction bounds vs the best informed attack, digits and MNIST.

For epsilon in {1, 2, 4, 8, 16} (q = 0.05, T = 200, delta = 1e-5), runs the
``dpsgd-distortion-bound`` experiment and reports, side by side from the same run: trainleak's
bound, Hayes et al. 2023 (converted to MSE), Guo et al. 2022 (unbiased only), the posterior-mean
attack and the population-mean baseline, with the ratio best attack / bound. Also times the
bound alone for one (q, sigma, T) on each data set (target: under a minute on two cores).

Usage: ``python benchmarks/dp_bounds.py [--quick]``; writes ``benchmarks/results/dp_bounds.json``
and ``benchmarks/results/dp_bounds.md``. MNIST is skipped (and said so) when its files are absent.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.bounds.dpsgd import Schedule, dpsgd_distortion_bound
from trainleak.data import load_digits, load_mnist
from trainleak.errors import DataNotFoundError
from trainleak.experiments import get_experiment

OUT = Path(__file__).parent / "results"
COLUMNS = ("epsilon", "sigma", "bound", "hayes_mse", "guo_unbiased", "posterior_mean",
           "posterior_mean_se", "prior_variance", "ratio_best_attack_to_bound")  # fmt: skip


def time_bound(x: torch.Tensor) -> float:
    start = time.perf_counter()
    dpsgd_distortion_bound(Schedule.constant(0.05, 1.0, 200), x, confidence=0.05)
    return time.perf_counter() - start


def run_dataset(name: str, quick: bool) -> dict[str, Any]:
    exp = get_experiment("dpsgd-distortion-bound")
    overrides: dict[str, Any] = {"dataset": name, "features": False, "map_targets": 0}
    if name == "mnist":
        overrides.update({"pool_size": 600, "n_targets": 8, "n_others": 500})
    if quick:
        overrides.update({"epsilons": [1.0, 8.0], "n_targets": 4, "pool_size": 300})
    start = time.perf_counter()
    res = exp.run(exp.make_config(overrides))
    rows = [{k: r[k] for k in COLUMNS} for r in res.tables["bound_vs_attacks"]]
    sample = load_digits().x if name == "digits" else load_mnist("train", limit=1000).x
    return {
        "dataset": name,
        "config": res.config,
        "rows": rows,
        "claims": [{"text": c.text, "holds": c.holds} for c in res.claims],
        "seconds": time.perf_counter() - start,
        "bound_seconds": time_bound(sample[:1000]),
    }


def markdown(results: list[dict[str, Any]], skipped: list[str]) -> str:
    lines = ["# DP-SGD reconstruction bounds vs the informed posterior-mean attack", ""]
    lines.append("q = 0.05, T = 200, delta = 1e-5, logistic regression, MSE per pixel. "
                 "Command: `python benchmarks/dp_bounds.py`.")  # fmt: skip
    for res in results:
        lines += ["", f"## {res['dataset']} ({res['seconds']:.0f} s; bound alone "
                  f"{res['bound_seconds']:.1f} s)", "",
                  "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]  # fmt: skip
        for r in res["rows"]:
            lines.append("| " + " | ".join(f"{r[c]:.4g}" for c in COLUMNS) + " |")
        lines.append("")
        for c in res["claims"]:
            lines.append(f"- {'holds' if c['holds'] else 'DOES NOT HOLD'}: {c['text']}")
    lines += [f"\nSkipped: {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def main() -> None:
    torch.set_num_threads(1)
    quick = "--quick" in sys.argv
    results, skipped = [], []
    for name in ("digits", "mnist"):
        try:
            results.append(run_dataset(name, quick))
        except DataNotFoundError as exc:
            skipped.append(f"{name}: {exc}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "dp_bounds.json").write_text(json.dumps({"results": results, "skipped": skipped},
                                                   indent=2, default=float))  # fmt: skip
    (OUT / "dp_bounds.md").write_text(markdown(results, skipped))


if __name__ == "__main__":
    main()
