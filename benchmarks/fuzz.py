"""``make fuzz``: property-based fuzzing of every parser of user input, at length.

The same targets as the default suite's smoke run (``tests/test_fuzz.py``, 40 cases each):
experiment configs, ``--set`` values, grid files, IDX files, CIFAR-10 PNG sprites and python
batches, state-dict files (safetensors, torch), checkpoint folders and gradient-update folders.
A case fails when anything but a ``TrainleakError`` escapes; hypothesis then shrinks it to a
small example, which the result file shows.

Usage:
    python benchmarks/fuzz.py [--cases-per-target 1200] [--seed 0]

Writes ``benchmarks/results/fuzz.json`` and ``fuzz.md``; exits 1 if any target failed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import trainleak  # noqa: E402
from fuzz_runner import run_target  # noqa: E402  (tests/ is put on the path above)
from fuzz_targets import TARGETS  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-per-target", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = []
    for name in TARGETS:
        start = time.perf_counter()
        outcome = run_target(name, args.cases_per_target, args.seed)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "target": name,
                "cases": outcome.cases,
                "seconds": round(seconds, 1),
                "failure": outcome.failure,
            }
        )
        status = "ok" if outcome.failure is None else "FAILED"
        print(f"{name:28s} {outcome.cases:6d} cases {seconds:7.1f} s  {status}", flush=True)
    doc = {
        "trainleak": trainleak.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "seed": args.seed,
        "cases_per_target": args.cases_per_target,
        "cases": sum(r["cases"] for r in rows),
        "failures": sum(r["failure"] is not None for r in rows),
        "targets": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fuzz.json").write_text(json.dumps(doc, indent=2) + "\n")
    (RESULTS / "fuzz.md").write_text(_markdown(doc))
    print(f"{doc['cases']} cases, {doc['failures']} failing target(s): {RESULTS / 'fuzz.md'}")
    return 1 if doc["failures"] else 0


def _markdown(doc: dict) -> str:
    lines = [
        "# Fuzzing the parsers of user input",
        "",
        "`make fuzz` (`python benchmarks/fuzz.py`): hypothesis feeds each parser drawn inputs "
        "(arbitrary bytes, valid files with a few random edits, headers that lie, random JSON "
        "and YAML structures); a case fails when anything but a `TrainleakError` escapes. "
        "The default test suite runs the same targets with 40 cases each "
        "(`tests/test_fuzz.py`).",
        "",
        f"Seed {doc['seed']}, {doc['cases_per_target']} cases asked per target, "
        f"Python {doc['python']} on {doc['machine']}: **{doc['cases']} cases run, "
        f"{doc['failures']} failing target(s).**",
        "",
        "| target | cases | seconds | result |",
        "|---|---:|---:|---|",
    ]
    for r in doc["targets"]:
        result = "only TrainleakError escaped" if r["failure"] is None else "FAILED (below)"
        lines.append(f"| {r['target']} | {r['cases']} | {r['seconds']} | {result} |")
    for r in doc["targets"]:
        if r["failure"] is not None:
            lines += ["", f"## {r['target']}", "", "```", r["failure"], "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
