"""Does a trained MIXGUARD client still use the server? (issue 13, diagnostic)

Trains the ``split-llm-mixguard`` MIXGUARD setting on the defaults (anchored calibrator), then
measures test accuracy through the protocol twice: as trained, and with the calibrator's
correction zeroed, so the top sees only the client's own clean bottom output and nothing of
the server's output (the correction is the only path from the server into the top). Equal
accuracies mean the client has learned to ignore the server on this task.

    python benchmarks/split_llm_server_ablation.py [--seeds 0 2]

Writes ``benchmarks/results/split_llm_server_ablation.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from trainleak.experiments.split_llm_mixguard import settings, training_config, world
from trainleak.experiments.split_llm_mixguard_claims import SplitLLMMixGuardConfig
from trainleak.models.split_lm import LMSplit
from trainleak.scenarios.split_llm import run_defense
from trainleak.systems.split_lm import accuracy

OUT = Path(__file__).resolve().parent / "results" / "split_llm_server_ablation.json"


def ablation(seed: int) -> dict[str, float]:
    cfg = SplitLLMMixGuardConfig(seed=seed)
    w, split = world(cfg), LMSplit(cfg.bottom_end, cfg.top_start)
    start = time.perf_counter()
    run, acc = run_defense(w, split, settings(cfg)["mixguard"], training_config(cfg), cfg.seed)
    if run.calibrator is None or run.calibrator.anchor != "anchored":
        raise SystemExit("needs MIXGUARD with the anchored calibrator (the default)")
    last = run.calibrator.net[-1]
    assert isinstance(last, torch.nn.Linear)
    norm = float(last.weight.detach().norm())
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
    ablated = accuracy(run, w.test, w.public_ids, seed=seed + 1)
    return {
        "seed": seed,
        "mixguard": acc,
        "server_ablated": ablated,
        "correction_weight_norm": norm,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 2])
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for s in args.seeds:
        rows.append(ablation(s))
        print(json.dumps(rows[-1]), flush=True)
    OUT.write_text(json.dumps({"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
