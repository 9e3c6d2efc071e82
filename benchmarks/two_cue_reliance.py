"""Benchmark: which cue do the AT-AT seed's defenses lean on? The two-cue task of
``trainleak.scenarios.feature_reliance`` (a visible class pattern, right 90% of the time, and
an imperceptible +-delta pattern, always right; after Ilyas et al. 2019), the experiment's MLP
trained with no defense, AT (eps 0.05) and AT-AT over a grid of weights and radii (the union
of the MNIST default and ORL benchmark knobs), several seeds each (data draw and
initialisation; shared across models, so comparisons with the standard model are paired).

Reliance = share of conflict images (the cues name different classes) classified by the
imperceptible cue. Reports, per model, the mean clean accuracy, the mean reliance, every seed's
reliance, and the one-sided 95% paired lower bound on (model - standard) reliance.

Usage: ``python benchmarks/two_cue_reliance.py [--seeds 3] [--delta 0.015] [--steps 600]
[--pattern-seed 0]``;
writes ``benchmarks/results/two_cue_reliance.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from trainleak.metrics.intervals import difference_lower_bound
from trainleak.scenarios.feature_reliance import TwoCueTask, measure_reliance
from trainleak.systems.classifier import ATAT, AdversarialTraining, Defense, Standard, TrainSettings

OUT = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--delta", type=float, default=0.015)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--weights", type=float, nargs="+", default=[0.08, 0.3, 1.0])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.005, 0.02, 0.05])
    parser.add_argument("--pattern-seed", type=int, default=0, help="seed of the cue patterns")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    task = TwoCueTask(delta=args.delta)
    models: list[tuple[str, Defense]] = [("standard", Standard()), ("at", AdversarialTraining())]
    models += [
        (f"atat-w{w:g}-e{e:g}", ATAT(eps=e, step=e / 5, weight=w))
        for e in args.eps
        for w in args.weights
    ]
    settings = TrainSettings(steps=args.steps)
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for name, defense in models:
        per_seed = [
            measure_reliance(task, defense, settings, seed, args.pattern_seed)
            for seed in range(args.seeds)
        ]
        rows.append(
            {
                "model": name,
                "clean": sum(r.clean_accuracy for r in per_seed) / len(per_seed),
                "reliance": [r.reliance for r in per_seed],
            }
        )
        print(name, [round(r.reliance, 3) for r in per_seed], flush=True)
    std = rows[0]["reliance"]
    for r in rows:
        r["mean"] = sum(r["reliance"]) / len(r["reliance"])
        r["above_standard_lower_95"] = (
            difference_lower_bound(r["reliance"], std, paired=True) if r is not rows[0] else None
        )
        r["below_standard_lower_95"] = (
            difference_lower_bound(std, r["reliance"], paired=True) if r is not rows[0] else None
        )
    seconds = time.perf_counter() - start
    OUT.mkdir(exist_ok=True)
    stem = f"two_cue_reliance{args.tag}"
    meta = {
        "task": repr(task),
        "steps": args.steps,
        "seeds": args.seeds,
        "pattern_seed": args.pattern_seed,
        "seconds": seconds,
    }
    (OUT / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# Two-cue reliance (seed 8: which cue AT and AT-AT lean on)",
        "",
        f"{task!r}, cue patterns of seed {args.pattern_seed}, {args.steps} Adam steps, "
        f"seeds 0..{args.seeds - 1} (paired), "
        f"{seconds:.0f} s. Reliance = share of conflict images classified by the "
        "imperceptible cue. AT: eps 0.05, 10 steps. AT-AT: targeted PGD, step eps / 5, 5 steps.",
        "",
        "| model | clean | reliance mean | per seed | above standard (lower 95%) "
        "| below standard (lower 95%) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        up, down = (
            "" if v is None else f"{v:+.3f}"
            for v in (r["above_standard_lower_95"], r["below_standard_lower_95"])
        )
        seeds = " / ".join(f"{v:.3f}" for v in r["reliance"])
        lines.append(
            f"| {r['model']} | {r['clean']:.3f} | {r['mean']:.3f} | {seeds} | {up} | {down} |"
        )
    (OUT / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
