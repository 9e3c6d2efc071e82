"""Benchmark the information revelation attack on distilled data sets (seed 13, issue 16).

Runs ``distillation-leakage`` on digits at its defaults and on MNIST and CIFAR-10 at a reduced
scale (two architectures, two shadow seeds, fewer iterations: the defaults are sized for 8x8
digits on two cores), and checks the issue's targets:

* revelation accuracy >= 0.8 for the algorithm and for the architecture (unseen targets);
* membership of the initialisation images of real-initialised sets: AUROC >= 0.9 and
  TPR at 1% FPR >= 0.3 (nearest-synthetic score; the surrogate scores are reported beside);
* recovery: real-initialised DM at 10 ipc recovers at least half its initialisation images at
  SSIM >= 0.5 (reported beside the same-budget auxiliary baseline and at SSIM >= 0.9);
* every algorithm's distilled sets beat random real subsets of the same size (mean gain > 0);
* the default digits run takes under 20 minutes.

Writes ``benchmarks/results/distillation.json`` and ``.md``. Run (from the repository root):
``TRAINLEAK_DATA=../shared/data OMP_NUM_THREADS=1 .venv/bin/python benchmarks/distillation.py``
(``--datasets digits`` for one data set, merged into the existing JSON; ``--digits-result
runs/X/result.json`` summarises an existing default run of ``trainleak run
distillation-leakage`` instead of running it again).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from statistics import mean
from typing import Any

import torch

from trainleak.audit.serialize import to_jsonable
from trainleak.experiments.distillation_leakage import run
from trainleak.experiments.distillation_leakage_claims import DistillationLeakageConfig

OUT = Path(__file__).parent / "results"
REDUCED: dict[str, Any] = {
    "n_private": 1000,
    "n_aux": 1000,
    "n_holdout": 500,
    "architectures": ["mlp", "convnet"],
    "shadow_seeds": 2,
    "utility_ipcs": [1, 10],
    "dc_iterations": 20,
    "dm_iterations": 200,
    "mtt_iterations": 50,
    "fingerprint_steps": 40,
    "surrogate_steps": 200,
    "lira_shadows": 4,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "digits": {},
    "mnist": {"dataset": "mnist", **REDUCED},
    # CIFAR-10: three shadow seeds (the meta-classifier learns from 3 x 2 x 3 sets) and two
    # target seeds, so the revelation accuracy is measured over 12 held-out sets, not 6.
    "cifar10": {"dataset": "cifar10", **REDUCED, "shadow_seeds": 3, "target_seeds": 2},
}


def _run(overrides: dict[str, Any], cache: Path) -> dict[str, Any]:
    cfg = DistillationLeakageConfig(**overrides, cache_dir=str(cache))
    res = run(cfg)
    return to_jsonable(
        {"config": res.config, "metrics": res.metrics, "tables": res.tables, "claims": res.claims}
    )


def _avg(rows: list[Mapping[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return mean(vals) if vals else None


def _revelation(tables: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for init in ("real", "noise"):
        rs = [r for r in tables["revelation"] if r["init"] == init]
        out[init] = {
            "algorithm": mean(r["algorithm"] == r["predicted_algorithm"] for r in rs),
            "architecture": mean(r["architecture"] == r["predicted_architecture"] for r in rs),
            "targets": len(rs),
        }
    return out


def _membership(tables: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in tables["membership"]:
        key = f"{r['algorithm'] if r['algorithm'] == 'real' else 'distilled'}/{r['init']}"
        out.setdefault(key, {}).setdefault(f"{r['method']}/{r['positives']}", []).append(r)
    return {
        k: {
            m: {s: _avg(rs, s) for s in ("auroc", "tpr_1", "tpr_01")} | {"n": len(rs)}
            for m, rs in v.items()
        }
        for k, v in out.items()
    }


def _membership_by_algorithm(tables: Mapping[str, Any], method: str) -> dict[str, Any]:
    """Real-initialised targets, initialisation images as positives, per algorithm."""
    out = {}
    rows = [
        r
        for r in tables["membership"]
        if r["init"] == "real" and r["positives"] == "init" and r["method"] == method
    ]
    for algo in sorted({r["algorithm"] for r in rows}):
        rs = [r for r in rows if r["algorithm"] == algo]
        out[algo] = {s: _avg(rs, s) for s in ("auroc", "tpr_1", "tpr_01")} | {"n": len(rs)}
    return out


def _recovery(tables: Mapping[str, Any], ipc: int) -> dict[str, Any]:
    out = {}
    for init in ("real", "noise"):
        for algo in sorted({r["algorithm"] for r in tables["recovery"]}):
            rs = [r for r in tables["recovery"] if r["init"] == init and r["algorithm"] == algo]
            fields = ("share_above", "strict_share", "mean_ssim", "baseline_share")
            out[f"{algo}/{init}"] = {f: _avg(rs, f) for f in (*fields, "baseline_strict_share")}
    out["ipc"] = ipc
    return out


def _utility(tables: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    rows = [r for r in tables["utility"] if r["init"] == "real"]
    for algo in sorted({r["algorithm"] for r in rows}):
        for ipc in sorted({r["ipc"] for r in rows}):
            rs = [r for r in rows if r["algorithm"] == algo and r["ipc"] == ipc]
            if rs:
                out[f"{algo}/ipc{ipc}"] = {
                    "distilled": _avg(rs, "distilled_acc"),
                    "random": _avg(rs, "random_acc"),
                    "full": _avg(rs, "full_acc"),
                    "rows": len(rs),
                }
    return out


def summarise(result: Mapping[str, Any], wall_s: float | None) -> dict[str, Any]:
    """The benchmark's numbers and the issue's targets, from one run's tables and metrics."""
    t, cfg = result["tables"], result["config"]
    rev, mem = _revelation(t), _membership(t)
    rec, util = _recovery(t, cfg["ipc"]), _utility(t)
    nn_real = mem["distilled/real"][f"{cfg['claim_method']}/init"]
    gains = {
        a: mean(v["distilled"] - v["random"] for k, v in util.items() if k.startswith(a + "/"))
        for a in cfg["algorithms"]
    }
    targets = {
        "reveal_algorithm>=0.8": rev["real"]["algorithm"] >= 0.8,
        "reveal_architecture>=0.8": rev["real"]["architecture"] >= 0.8,
        "membership_auroc>=0.9": nn_real["auroc"] >= 0.9,
        "membership_tpr1>=0.3": nn_real["tpr_1"] >= 0.3,
        "recovery_dm_share@0.5>=0.5": (rec.get("dm/real", {}).get("share_above") or 0) >= 0.5,
        "distilled_beats_random": all(g > 0 for g in gains.values()),
    }
    seconds = wall_s if wall_s is not None else result["metrics"].get("total_s")
    if cfg["dataset"] == "digits":
        targets["default_run<20min"] = seconds is not None and seconds < 20 * 60
    return {
        "revelation": rev,
        "held_out_shadow": {
            k: result["metrics"].get(f"held_out_shadow_{k}") for k in ("algorithm", "architecture")
        },
        "membership": mem,
        "membership_by_algorithm": _membership_by_algorithm(t, cfg["claim_method"]),
        "recovery": rec,
        "utility": util,
        "utility_gain": gains,
        "claims": [{"text": c["text"], "holds": c["holds"]} for c in result["claims"]],
        "seconds": seconds,
        "cpu_seconds": result["metrics"].get("cpu_s"),
        "targets": targets,
        "config": cfg,
    }


def _recovery_text(rec: Mapping[str, Any] | None) -> str:
    if not rec:
        return "no DM rows"
    return (
        f"share at SSIM>=0.5: {rec['share_above']:.3f} (auxiliary baseline "
        f"{rec['baseline_share']:.3f}); at >=0.9: {rec['strict_share']:.3f} "
        f"({rec['baseline_strict_share']:.3f})"
    )


def _markdown(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "# distillation benchmark (seed 13, IRA)",
        "",
        "| data | target | met | measured |",
        "|---|---|---|---|",
    ]
    notes = []
    for name, s in summaries.items():
        nn = s["membership"]["distilled/real"]["nn/init"]
        measured = {
            "reveal_algorithm>=0.8": f"{s['revelation']['real']['algorithm']:.3f}",
            "reveal_architecture>=0.8": f"{s['revelation']['real']['architecture']:.3f}",
            "membership_auroc>=0.9": f"{nn['auroc']:.3f}",
            "membership_tpr1>=0.3": f"{nn['tpr_1']:.3f}",
            "recovery_dm_share@0.5>=0.5": _recovery_text(s["recovery"].get("dm/real")),
            "distilled_beats_random": ", ".join(
                f"{k} {v:+.3f}" for k, v in s["utility_gain"].items()
            ),
            "default_run<20min": f"{s['seconds']:.0f} s wall, {s['cpu_seconds']:.0f} s CPU",
        }
        for target, met in s["targets"].items():
            lines.append(f"| {name} | {target} | {'yes' if met else 'NO'} | {measured[target]} |")
        by_algo = s.get("membership_by_algorithm") or {}
        per = ", ".join(f"{a} {v['auroc']:.3f} / {v['tpr_1']:.3f}" for a, v in by_algo.items())
        util = "; ".join(
            f"{k} {v['distilled']:.3f} vs {v['random']:.3f}" for k, v in s["utility"].items()
        )
        notes.append(f"- {name}: membership AUROC / TPR@1% per algorithm: {per or 'n/a'}")
        notes.append(f"- {name}: test accuracy distilled vs random subsets: {util}")
        notes.append(f"- {name}: {s['seconds']:.0f} s wall, {s['cpu_seconds']:.0f} s CPU")
    lines += [
        "",
        "Membership: initialisation images of real-initialised sets against held-out records,",
        "nearest-synthetic score; utility gain: mean over ipc of distilled minus random-subset",
        "test accuracy (real-initialised sets).",
        "",
        *notes,
        "",
        "Full numbers (membership by method, noise-init, reference) in the JSON file.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", default="digits,mnist,cifar10")
    parser.add_argument("--digits-result", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    summaries: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            if name == "digits" and args.digits_result is not None:
                summaries[name] = summarise(json.loads(args.digits_result.read_text()), None)
                continue
            start = time.perf_counter()
            result = _run(CONFIGS[name], Path(tmp) / name)
            summaries[name] = summarise(result, time.perf_counter() - start)
            _write(summaries)
    print(_markdown(_write(summaries)))


def _write(summaries: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``summaries`` into the results on disk (other data sets are kept) and rewrite the
    JSON and the Markdown table; returns everything on disk."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "distillation.json"
    merged = json.loads(path.read_text()) if path.is_file() else {}
    merged.update(summaries)
    path.write_text(json.dumps(merged, indent=2))
    (OUT / "distillation.md").write_text(_markdown(merged))
    return merged


if __name__ == "__main__":
    main()
