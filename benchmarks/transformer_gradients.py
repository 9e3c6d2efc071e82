"""Benchmark: transformer gradient inversion (issue 14), TIGER against DAGER on pretrained
models, WikiText-2 sentences.

Parts:

- ``minilm``: all-MiniLM-L6-v2 (BERT encoder, width 384) with a fresh classification head,
  B = 8 sequences of up to n tokens: exact-sequence rate, token accuracy, ROUGE-1/2, seconds
  for DAGER and TIGER, noiseless and with Gaussian noise at ``--noise`` x each tensor's RMS.
  The runtime target compares TIGER's seconds with DAGER's exhaustive search, whose cost is
  the product of the layer-1 candidate counts times the seconds per evaluated sequence measured
  in the same run (an extrapolation: enumerating it is infeasible at n = 32); the product over
  the tokens the embedding gradient places is reported too.
- ``smollm2``: SmolLM2-135M (LLaMA decoder, width 576), B in {1, 4}, noiseless and over the
  noise levels until DAGER's ROUGE-1 drops below 0.5.

Clients run in float64 (the noiseless cells then test the attacks, not float32 rounding).

Usage:
    python benchmarks/transformer_gradients.py [--lengths 16 32] [--parts minilm smollm2]
    # the MiniLM cells split over processes, then merged:
    python benchmarks/transformer_gradients.py --parts minilm --tag _minilm
    python benchmarks/transformer_gradients.py --parts minilm --lengths 32 --noise 0 \
        --attacks tiger --tag _minilm_tiger32
    python benchmarks/transformer_gradients.py --parts minilm --lengths 32 --noise-only \
        --tag _minilm_noise
    python benchmarks/transformer_gradients.py --merge _minilm _minilm_tiger32 _minilm_noise \
        --tag _minilm
    # SmolLM2 at n = 8 and 16 (noise levels until DAGER's ROUGE-1 < 0.5), the n = 16 cells
    # split over processes (--smollm2-noises with no value: noiseless only), then merged:
    S="--parts smollm2 --smollm2-length 16"
    python benchmarks/transformer_gradients.py --parts smollm2 --smollm2-length 8 \
        --smollm2-noises 1e-5 1e-4 1e-3 1e-2 --tag _smollm2_n8
    python benchmarks/transformer_gradients.py $S --smollm2-noises 1e-5 1e-4 1e-3 1e-2 \
        --attacks dager --tag _smollm2_n16_dager
    python benchmarks/transformer_gradients.py $S --smollm2-noises 1e-5 --attacks tiger \
        --smollm2-batches 1 --tag _smollm2_n16_tiger_b1
    python benchmarks/transformer_gradients.py $S --smollm2-noises --attacks tiger \
        --smollm2-batches 4 --tag _smollm2_n16_tiger_b4
    python benchmarks/transformer_gradients.py $S --smollm2-noises 1e-5 --attacks tiger \
        --smollm2-batches 4 --noise-only --tag _smollm2_n16_tiger_b4_noise
    python benchmarks/transformer_gradients.py --merge _smollm2_n8 _smollm2_n16_dager \
        _smollm2_n16_tiger_b1 _smollm2_n16_tiger_b4 _smollm2_n16_tiger_b4_noise --tag _smollm2

Writes ``benchmarks/results/transformer_gradients{--tag}.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks.transformer._localise import placed_candidates
from trainleak.attacks.transformer._spans import build_spans
from trainleak.attacks.transformer.dager import Dager
from trainleak.attacks.transformer.tiger import Tiger
from trainleak.models.language import load_minilm, load_smollm2
from trainleak.scenarios.transformer_gradients import client_release, run_attacks
from trainleak.systems.transformer_clients import wikitext_sentences

OUT = Path(__file__).resolve().parent / "results"
PARTIAL: list[dict] = []
PARTIAL_TAG = [""]
ONLY: list[str] = []


def _write(tag: str, res: dict[str, Any]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"transformer_gradients{tag}.json").write_text(json.dumps(res, indent=2))
    (OUT / f"transformer_gradients{tag}.md").write_text(_markdown(res))


def _write_partial(tag: str, rows: list[dict[str, Any]]) -> None:
    """Rows finished so far, beside (never over) the finished results of ``tag``."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"transformer_gradients{tag}_partial.json"
    path.write_text(json.dumps({"partial_rows": rows}, indent=2))


def _cell(lm: Any, texts: list[str], n: int, noise: float, tiger_steps: int) -> list[dict]:
    batch, rel = client_release(lm, texts, n, noise=noise)
    dager = Dager(beam_width=32) if noise == 0 else Dager(rank="batch", exact=False, beam_width=32)
    rows = []
    attacks = {"dager": dager, "tiger": Tiger(steps=tiger_steps)}
    attacks = {k: v for k, v in attacks.items() if k in ONLY} if ONLY else attacks
    for c in run_attacks(batch, rel, attacks):
        rows.append(
            {
                "model": lm.name,
                "B": len(texts),
                "n": n,
                "noise": noise,
                "attack": c.attack,
                "exact_rate": c.scores.exact_rate,
                "token_accuracy": c.scores.token_accuracy,
                "rouge1": c.scores.rouge1,
                "rouge2": c.scores.rouge2,
                "seconds": c.seconds,
            }
        )
        print(rows[-1], flush=True)
        PARTIAL.append(rows[-1])
        _write_partial(PARTIAL_TAG[0], PARTIAL)
    return rows


def _exhaustive_seconds(lm: Any, texts: list[str], n: int) -> dict[str, float]:
    """DAGER's exhaustive encoder search cost: candidate-count product x seconds per sequence."""
    _, rel = client_release(lm, texts, n)
    spans = build_spans(rel, batch=rel.batch_size, rank="tolerance", tol=None, exact=True)
    counts = [int((spans.table[t] < 1e-5).sum()) for t in range(n)]
    placed = placed_candidates(rel) or [set()] * n
    placed_counts = [
        len([v for v in place if float(spans.table[t, v]) < 1e-5]) for t, place in enumerate(placed)
    ]
    sample = [[int(spans.table[t].argmin()) for t in range(n)] for _ in range(64)]
    start = time.perf_counter()
    spans.distances(sample)
    per_seq = (time.perf_counter() - start) / len(sample)
    combos = 1.0
    combos_placed = 1.0
    for c, cp in zip(counts[1:-1], placed_counts[1:-1], strict=True):
        combos *= max(c, 1)
        combos_placed *= max(cp, 1)
    return {
        "combinations": combos,
        "combinations_placed": combos_placed,
        "seconds_per_sequence": per_seq,
        "exhaustive_seconds": combos * per_seq,
    }


def minilm(
    lengths: list[int], noise: float, steps: int, noiseless: bool = True, text_seed: int = 0
) -> dict[str, Any]:
    lm = load_minilm(num_labels=2)
    lm.module.double()
    texts = wikitext_sentences(8, seed=text_seed, min_words=8, max_words=40)
    rows: list[dict] = []
    for n in lengths if noiseless else []:
        rows += _cell(lm, texts, n, 0.0, steps)
    if noise > 0:
        rows += _cell(lm, texts, lengths[-1], noise, steps)
    if not noiseless:
        return {"rows": rows}
    tiger = next(
        (r for r in rows if r["attack"] == "tiger" and r["noise"] == 0 and r["n"] == lengths[-1]),
        None,
    )
    if tiger is None:  # --attacks dager: no TIGER row to set against the exhaustive search
        return {"rows": rows}
    ex = _exhaustive_seconds(lm, texts, lengths[-1])
    ex["tiger_seconds"] = tiger["seconds"]
    ex["ratio_tiger_over_exhaustive"] = tiger["seconds"] / max(ex["exhaustive_seconds"], 1e-12)
    return {"rows": rows, "runtime": ex}


def smollm2(
    n: int, noises: list[float], steps: int, batches: list[int], noiseless: bool = True
) -> dict[str, Any]:
    """B in ``batches``: noiseless (unless ``noiseless`` is off), then ``noises`` in order
    until DAGER's ROUGE-1 drops below 0.5 (all of them when DAGER is not run)."""
    lm = load_smollm2()
    lm.module.double()
    rows: list[dict] = []
    for b in batches:
        texts = wikitext_sentences(b, seed=1, min_words=6, max_words=30)
        for noise in [0.0, *noises] if noiseless else noises:
            cell = _cell(lm, texts, n, noise, steps)
            rows += cell
            dager = next((r for r in cell if r["attack"] == "dager"), None)
            if noise > 0 and dager is not None and dager["rouge1"] < 0.5:
                break
    return {"rows": rows}


def _markdown(res: dict[str, Any]) -> str:
    machine = res.get("machine", "")
    lines = ["# Transformer gradient inversion (issue 14)", "", f"Machine: {machine}", ""]
    if "text_seed" in res.get("minilm", {}):
        lines += [f"MiniLM batch: WikiText-2 seed {res['minilm']['text_seed']}", ""]
    head = "| model | B | n | noise | attack | exact | token acc | ROUGE-1 | ROUGE-2 | s |"
    lines += [head, "|" + "---|" * 10]
    parts = [res.get(p, {}).get("rows", []) for p in ("minilm", "smollm2")]
    for rows in [*parts, res.get("partial_rows", [])]:
        for r in rows:
            lines.append(
                f"| {r['model']} | {r['B']} | {r['n']} | {r['noise']:g} | {r['attack']} | "
                f"{r['exact_rate']:.2f} | {r['token_accuracy']:.2f} | {r['rouge1']:.2f} | "
                f"{r['rouge2']:.2f} | {r['seconds']:.1f} |"
            )
    rt = res.get("minilm", {}).get("runtime")
    if rt:
        lines += [
            "",
            "Runtime at the longest n (DAGER exhaustive extrapolated):",
            "",
            "```",
            json.dumps(rt, indent=2),
            "```",
        ]
    return "\n".join(lines) + "\n"


def merge(tag: str, parts: list[str]) -> None:
    """Write ``tag``'s result files from the rows (final or partial) and runtime blocks of the
    result files of ``parts`` (cells run in separate processes at the same time)."""
    rows: list[dict] = []
    smol: list[dict] = []
    runtime: dict[str, Any] = {}
    machines = []
    for part in parts:
        final, partial = (OUT / f"transformer_gradients{part}{s}.json" for s in ("", "_partial"))
        res = json.loads(final.read_text()) if final.is_file() else {}
        machines.append(res.get("machine", "?"))
        smol += res.get("smollm2", {}).get("rows", [])
        rows += res.get("minilm", {}).get("rows", []) or (
            json.loads(partial.read_text())["partial_rows"]
            if partial.is_file() and "smollm2" not in res
            else []
        )
        runtime.update(res.get("minilm", {}).get("runtime", {}))
    merged: dict[str, Any] = {"machine": f"{machines[0]}; merged from {', '.join(parts)}"}
    if rows:
        merged["minilm"] = {"rows": rows, "runtime": runtime}
    if smol:
        merged["smollm2"] = {"rows": smol}
    _write(tag, merged)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--noise", type=float, default=1e-3)
    ap.add_argument("--smollm2-length", type=int, default=16)
    ap.add_argument("--smollm2-noises", type=float, nargs="*", default=[1e-4, 1e-3, 1e-2])
    ap.add_argument("--smollm2-batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument(
        "--text-seed", type=int, default=0, help="MiniLM: the WikiText-2 batch (0: benchmark)"
    )
    ap.add_argument("--parts", nargs="+", default=["minilm", "smollm2"])
    ap.add_argument("--tag", default="", help="suffix of the result files")
    ap.add_argument("--merge", nargs="+", default=[], help="merge these tags' results into --tag")
    ap.add_argument("--attacks", nargs="+", default=[], help="run only these (default: both)")
    ap.add_argument(
        "--noise-only", action="store_true", help="only the noised cells (MiniLM: no runtime)"
    )
    args = ap.parse_args()
    if args.merge:
        merge(args.tag, args.merge)
        return
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    res: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads"
    }
    PARTIAL_TAG[0] = args.tag
    ONLY[:] = args.attacks
    for part in args.parts:
        if part == "minilm":
            res["minilm"] = minilm(
                args.lengths, args.noise, args.steps, not args.noise_only, args.text_seed
            )
            res["minilm"]["text_seed"] = args.text_seed
        else:
            res["smollm2"] = smollm2(
                args.smollm2_length,
                args.smollm2_noises,
                args.steps,
                args.smollm2_batches,
                not args.noise_only,
            )
        _write(args.tag, res)
        # the complete result supersedes the rows checkpointed while the run was going
        (OUT / f"transformer_gradients{args.tag}_partial.json").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
