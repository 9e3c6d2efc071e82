"""Benchmark: DP-SGD reconstruction bounds vs the best informed attack, digits and MNIST.

For epsilon in {1, 2, 4, 8, 16} (q = 0.05, T = 200, delta = 1e-5), runs the
``dpsgd-distortion-bound`` experiment and reports, side by side from the same run: trainleak's
population-prior bound (the headline, 95% confidence), the pool-prior bound (target uniform
over the public candidates), Hayes et al. 2023 (in success probability and converted to MSE),
Guo et al. 2022 (unbiased only), the population-setting and the pool-setting posterior-mean
attacks with one-sided 95% upper limits, and the identification rate. Then the concentrating
regime where the validity check can fail. Also times the population bound alone for one
(q, sigma, T) on each data set (target: under a minute on two cores).

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
COLUMNS = ("epsilon", "sigma", "population_bound", "pool_bound", "hayes_mse", "guo_unbiased",
           "population_posterior_mean", "population_posterior_mean_ucl", "posterior_mean",
           "posterior_mean_ucl", "prior_variance", "identified", "hayes_success",
           "leakage_success")  # fmt: skip
VALIDITY = ("sigma", "epsilon", "pool_size", "leakage", "pool_bound", "posterior_mean",
            "posterior_mean_ucl", "prior_variance", "identified", "hayes_success",
            "leakage_success")  # fmt: skip


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
        overrides.update({"epsilons": [1.0, 8.0], "n_targets": 6, "pool_size": 300,
                          "validity_noise_multipliers": [1.5], "validity_targets": 60})  # fmt: skip
    start = time.perf_counter()
    res = exp.run(exp.make_config(overrides))
    table = res.tables["bound_vs_attacks"]
    rows = [{k: r[k] for k in COLUMNS} for r in table if r["regime"] == "sweep"]
    validity = [{k: r[k] for k in VALIDITY} for r in table if r["regime"] == "concentrating"]
    sample = load_digits().x if name == "digits" else load_mnist("train", limit=1000).x
    return {
        "dataset": name,
        "config": res.config,
        "rows": rows,
        "validity": validity,
        "claims": [
            {"text": c.text, "holds": c.holds, "not_tested": c.evidence.get("not_tested")}
            for c in res.claims
        ],
        "seconds": time.perf_counter() - start,
        "bound_seconds": time_bound(sample[:1000]),
    }


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> list[str]:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return out + ["| " + " | ".join(_cell(r[c]) for c in columns) + " |" for r in rows]


def markdown(results: list[dict[str, Any]], skipped: list[str], command: str) -> str:
    lines = ["# DP-SGD reconstruction bounds vs the informed posterior-mean attack", ""]
    lines.append("q = 0.05, T = 200, delta = 1e-5, logistic regression, MSE per pixel. Headline: "
                 "population_bound (population prior, 95% confidence); pool_bound assumes the "
                 "target uniform over the public candidates, which the pool-setting attacks "
                 "(posterior_mean) know; population_posterior_mean knows only the candidates "
                 "other than the target. *_ucl: one-sided 95% upper limits over targets; "
                 "identified: the posterior's top candidate is the target; hayes_success and "
                 f"leakage_success: success-probability bounds. Command: `{command}`.")  # fmt: skip
    for res in results:
        lines += ["", f"## {res['dataset']} ({res['seconds']:.0f} s; population bound alone "
                  f"{res['bound_seconds']:.1f} s)", ""]  # fmt: skip
        lines += _table(res["rows"], COLUMNS)
        lines += ["", "Concentrating regime (the validity check):", ""]
        lines += _table(res["validity"], VALIDITY)
        lines.append("")
        for c in res["claims"]:
            verdict = "holds" if c["holds"] else "DOES NOT HOLD"
            if c["not_tested"]:
                verdict = f"not tested ({c['not_tested']})"
            lines.append(f"- {verdict}: {c['text']}")
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
    command = "python benchmarks/dp_bounds.py" + (" --quick" if quick else "")
    (OUT / "dp_bounds.md").write_text(markdown(results, skipped, command))


if __name__ == "__main__":
    main()
