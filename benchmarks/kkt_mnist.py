"""Benchmark: KKT reconstruction on MNIST odd/even, init scale chosen on a validation split.

Protocol (nothing is tuned on the images it is evaluated on):

1. MNIST's training file is split once (``split_seed``) into a private pool, a public held-out
   part and a reference held-out part; the private pool is cut into a *validation* half and an
   *evaluation* half (:class:`trainleak.data.HeldOutSplit`).
2. Tuning: for every init scale in ``--grid``, one run on a training set drawn from the
   validation half (seed ``--tune-seed``, no untrained control). The chosen scale maximises the
   attack's SSIM >= 0.4 count minus the best equal-budget baseline's (ties: the specificity
   count). Every value tried is reported.
3. Evaluation: ``--seeds`` runs at the chosen scale on training sets drawn from the evaluation
   half (seeds 0, 1, ...), each with the untrained control. The experiment's own claim
   functions are applied to the rows of all seeds (paired one-sided 95% t bounds over seeds);
   per method the table gives the mean and a two-sided 95% t interval over seeds.

Each run is the ``kkt-reconstruction`` experiment (100 training images, 784-1000-1, GD); finished
runs are cached in ``--cache`` so an interrupted benchmark resumes.

Usage:
    python benchmarks/kkt_mnist.py [--grid 0.0003 0.001 0.003] [--seeds 3] [--jobs 1]
        [--set key=value ...]

Writes ``benchmarks/results/kkt_mnist.json`` and ``benchmarks/results/kkt_mnist.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch
import yaml

from trainleak.experiments import evaluate_claims, get_experiment
from trainleak.experiments._kkt_claims import CLAIMS, RunRow
from trainleak.experiments._kkt_common import ScoreRow
from trainleak.metrics.intervals import mean_lower_bound, mean_upper_bound

DEFAULTS: dict[str, Any] = {
    "dataset": "mnist",
    "per_class": 50,
    "hidden": [1000],
    "train_steps": 30000,
    "attack_steps": 10000,
    "split_seed": 0,
}
OUT = Path(__file__).resolve().parent / "results"
TABLE = "scores (every method, every seed)"
RUNS = "training and attack (per seed)"


def _one(overrides: dict[str, Any], cache: Path, run: bool = True) -> dict[str, Any] | None:
    """Run one experiment config (or read it from the cache): its rows and timings.

    With ``run=False`` only the cache is read (``None`` when the run is not there).
    """
    key = json.dumps(overrides, sort_keys=True)
    path = cache / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if path.is_file():
        return dict(json.loads(path.read_text()))
    if not run:
        return None
    exp = get_experiment("kkt-reconstruction")
    start = time.perf_counter()
    result = exp.run(exp.make_config(overrides))
    rec = {
        "key": key,
        "overrides": overrides,
        "wall_seconds": time.perf_counter() - start,
        "scores": result.tables[TABLE],
        "runs": result.tables[RUNS],
    }
    path.write_text(json.dumps(rec, indent=1, default=str))
    return rec


def _run_all(
    configs: list[dict[str, Any]], cache: Path, jobs: int, run: bool = True
) -> list[dict[str, Any] | None]:
    if jobs <= 1 or not run:
        return [_one(c, cache, run) for c in configs]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_one, configs, [cache] * len(configs)))


def _margin(rec: dict[str, Any]) -> tuple[int, int]:
    """Selection score: attack's SSIM >= 0.4 count minus the best equal-budget baseline's."""
    rows = rec["scores"]
    att = next(r for r in rows if r["role"] == "attack")
    best = max(r["ssim_04"] for r in rows if r["role"] in ("baseline", "control"))
    return att["ssim_04"] - best, att["specific"]


def _interval(values: list[float]) -> tuple[float, float, float]:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    return mean, mean_lower_bound(values, 0.975), mean_upper_bound(values, 0.975)


def _summary(scores: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for method in dict.fromkeys(r["method"] for r in scores):
        rs = [r for r in scores if r["method"] == method]
        row: dict[str, Any] = {"method": method, "role": rs[0]["role"], "seeds": len(rs)}
        row["candidates"] = rs[0]["candidates"]
        for key in ("ssim_04", "ssim_06", "median_ssim", "specific", "specific_ssim_04"):
            row[key] = _interval([float(r[key]) for r in rs])
            row[key + "_per_seed"] = [r[key] for r in rs]
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=float, nargs="+", default=[0.0003, 0.001, 0.003])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tune-seed", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/trainleak_kkt_mnist_cache"))
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the results")
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="run nothing; report the cached runs (a partial report if seeds are missing)",
    )
    parser.add_argument("--set", action="append", default=[], help="config override key=value")
    args = parser.parse_args()
    base = dict(DEFAULTS)
    for item in args.set:
        key, _, value = item.partition("=")
        base[key] = yaml.safe_load(value)
    args.cache.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    run = not args.cached_only
    tune_cfgs = [
        {**base, "init_scale": s, "pool": "validation", "seed": args.tune_seed, "seeds": 1}
        | {"untrained_control": False}
        for s in args.grid
    ]
    tuned = [
        (scale, rec)
        for scale, rec in zip(args.grid, _run_all(tune_cfgs, args.cache, args.jobs, run))
        if rec is not None
    ]
    if not tuned:
        raise SystemExit("no tuning run is in the cache yet")
    chosen = max(tuned, key=lambda t: _margin(t[1]))[0]
    eval_cfgs = [
        {**base, "init_scale": chosen, "pool": "evaluation", "seed": s, "seeds": 1}
        for s in range(args.seeds)
    ]
    evaluated = [e for e in _run_all(eval_cfgs, args.cache, args.jobs, run) if e is not None]
    record = _record(args, base, tuned, chosen, evaluated, time.perf_counter() - start)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kkt_mnist.json").write_text(json.dumps(record, indent=2, default=str))
    (args.out / "kkt_mnist.md").write_text(_markdown(record))
    print((args.out / "kkt_mnist.md").read_text())


def _record(
    args: argparse.Namespace,
    base: dict[str, Any],
    tuned: list[tuple[float, dict[str, Any]]],
    chosen: float,
    evaluated: list[dict[str, Any]],
    wall: float,
) -> dict[str, Any]:
    scores = [s for rec in evaluated for s in rec["scores"]]
    runs = [r for rec in evaluated for r in rec["runs"]]
    rows: list[RunRow | ScoreRow] = [RunRow(**r) for r in runs]
    rows += [ScoreRow(**s) for s in scores]
    exp = get_experiment("kkt-reconstruction")
    cfg = exp.make_config({**base, "init_scale": chosen, "seeds": args.seeds})
    claims = evaluate_claims(CLAIMS, rows, cfg) if rows else []
    return {
        "config": base,
        "grid": args.grid,
        "tuning": [
            {
                "init_scale": s,
                "selection_score": list(_margin(rec)),
                "scores": rec["scores"],
                "min_margin": rec["runs"][0]["min_margin"],
                "wall_seconds": rec["wall_seconds"],
            }
            for s, rec in tuned
        ],
        "chosen_init_scale": chosen,
        "evaluation_seeds": [json.loads(e["key"])["seed"] for e in evaluated],
        "planned_seeds": args.seeds,
        "summary": _summary(scores),
        "scores": scores,
        "runs": runs,
        "claims": [{"text": c.text, "holds": c.holds, **c.evidence} for c in claims],
        "wall_seconds_this_invocation": wall,
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
    }


def _fmt(t: tuple[float, float, float], digits: int = 1) -> str:
    mean, lo, hi = (v + 0.0 for v in t)  # + 0.0 turns -0.0 into 0.0
    if lo != lo:  # nan: a single seed
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _header(rec: dict[str, Any]) -> list[str]:
    cfg, runs = rec["config"], rec["runs"]
    arch = "-".join(str(v) for v in [784, *cfg["hidden"], 1])
    cands = rec["tuning"][0]["scores"][0]["candidates"]
    timing = (
        f" Mean training {statistics.fmean(r['train_seconds'] for r in runs):.0f} s, "
        f"reconstruction {statistics.fmean(r['attack_seconds'] for r in runs):.0f} s per seed "
        f"(wall, on a shared two-core machine), {rec['machine']['threads']} torch thread(s)."
        if runs
        else ""
    )
    lines = [
        "# KKT reconstruction on MNIST odd/even",
        "",
        f"Command: `python benchmarks/kkt_mnist.py --grid {' '.join(map(str, rec['grid']))} "
        f"--seeds {rec['planned_seeds']}` (config in kkt_mnist.json). "
        f"{2 * cfg['per_class']} training images per seed, {arch} bias-free MLP, full-batch GD "
        f"{cfg['train_steps']} steps, KKT attack {cfg['attack_steps']} steps with {cands} "
        f"candidates.{timing}",
        "",
    ]
    missing_tuning = len(rec["grid"]) - len(rec["tuning"])
    if missing_tuning or len(rec["evaluation_seeds"]) < rec["planned_seeds"]:
        lines += [
            f"**PARTIAL** (`--cached-only`): {len(rec['tuning'])} of {len(rec['grid'])} tuning "
            f"runs and {len(rec['evaluation_seeds'])} of {rec['planned_seeds']} evaluation seeds "
            "had finished when this report was written.",
            "",
        ]
    return lines


def _markdown(rec: dict[str, Any]) -> str:
    lines = [
        *_header(rec),
        "## Init scale chosen on the validation half of the private pool",
        "",
        "| init scale | attack SSIM>=0.4 | best equal-budget baseline | attack specific "
        "| best baseline specific | min margin |",
        "|---|---|---|---|---|---|",
    ]
    for t in rec["tuning"]:
        att = next(r for r in t["scores"] if r["role"] == "attack")
        others = [r for r in t["scores"] if r["role"] in ("baseline", "control")]
        best = max(r["ssim_04"] for r in others)
        best_spec = max(r["specific"] for r in others)
        lines.append(
            f"| {t['init_scale']:g} | {att['ssim_04']} | {best} | {att['specific']} | "
            f"{best_spec} | {t['min_margin']:.2f} |"
        )
    lines += [
        "",
        f"Chosen: init scale {rec['chosen_init_scale']:g} (largest SSIM>=0.4 margin over the best "
        "equal-budget baseline; ties broken by the specificity count).",
        "",
        "Every method on the validation run (SSIM>=0.4 / specific, of "
        f"{rec['tuning'][0]['scores'][0]['n']} images):",
        "",
        "| method | " + " | ".join(f"init {t['init_scale']:g}" for t in rec["tuning"]) + " |",
        "|---|" + "---|" * len(rec["tuning"]),
        *(
            f"| {m} | "
            + " | ".join(
                "{ssim_04} / {specific}".format(**next(r for r in t["scores"] if r["method"] == m))
                for t in rec["tuning"]
            )
            + " |"
            for m in dict.fromkeys(r["method"] for r in rec["tuning"][0]["scores"])
        ),
        "",
        f"## Evaluation half, seeds {rec['evaluation_seeds']}: mean [95% t interval] over seeds",
        "",
        "'specific': training images whose matched candidate is closer to them than to every "
        "reference held-out image of the same digit (train / held-out distance ratio < 1).",
        "",
        "| method | candidates | SSIM>=0.4 | SSIM>=0.6 | median SSIM | specific "
        "| specific and SSIM>=0.4 |",
        "|---|---|---|---|---|---|---|",
    ]
    if not rec["summary"]:
        lines.append("| (no evaluation seed finished yet) | | | | | | |")
    for row in rec["summary"]:
        lines.append(
            f"| {row['method']} | {row['candidates']} | {_fmt(row['ssim_04'])} | "
            f"{_fmt(row['ssim_06'])} | {_fmt(row['median_ssim'], 3)} | {_fmt(row['specific'])} | "
            f"{_fmt(row['specific_ssim_04'])} |"
        )
    lines += ["", "Per seed (SSIM>=0.4 / specific):", ""]
    for row in rec["summary"]:
        lines.append(f"- {row['method']}: {row['ssim_04_per_seed']} / {row['specific_per_seed']}")
    lines += ["", "Claims (the experiment's claim functions on the rows of all seeds):", ""]
    for c in rec["claims"]:
        lines.append(f"- [{'holds' if c['holds'] else 'does NOT hold'}] {c['text']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
