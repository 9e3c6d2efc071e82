"""Trace of the noiseless encoder search (issue 14): DAGER's restarted, anchored, growing
search on all-MiniLM-L6-v2 (B = 8 WikiText-2 sentences, float64 client), one line per
restart (a growth, or the key-span completion of the last sequence): the length returned,
``J`` per position, the worst span distance, whether it is a true sequence, how many are
accepted, seconds and sequences evaluated. It runs the search
alone (no continuous stage), with DAGER's settings (6 B restarts, 4 sweeps, eps 1e-12,
acceptance 1e-3), so a batch's exact count is visible long before a full benchmark row ends.

Usage:
    python benchmarks/transformer_search_trace.py --text-seed 0 --length 32

Writes ``benchmarks/results/transformer_search_trace_seed{N}_n{L}.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from trainleak.attacks.transformer import _assign
from trainleak.attacks.transformer._localise import placed_candidates
from trainleak.attacks.transformer._spans import build_spans
from trainleak.models.language import load_minilm
from trainleak.scenarios.transformer_gradients import client_release
from trainleak.systems.transformer_clients import wikitext_sentences

OUT = Path(__file__).resolve().parent / "results"


def _record(rows: list[dict], got, st, seqs, start: float, kind: str) -> None:  # type: ignore[no-untyped-def]
    seq, j, worst = got
    rows.append(
        {
            "kind": kind,
            "length": len(seq),
            "j_per_position": j / len(seq),
            "worst": worst,
            "true": seq in seqs,
            "accepted_before": len(st.accepted),
            "seconds": time.perf_counter() - start,
            "evaluated": st.evaluated,
        }
    )
    print(rows[-1], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--text-seed", type=int, default=0)
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--restarts", type=int, default=48)
    args = ap.parse_args()
    lm = load_minilm(num_labels=2)
    lm.module.double()
    texts = wikitext_sentences(8, seed=args.text_seed, min_words=8, max_words=40)
    batch, rel = client_release(lm, texts, args.length)
    seqs = batch.sequences()
    spans = build_spans(rel, batch=8, rank="tolerance", tol=None, exact=True)
    placed = placed_candidates(rel)
    if placed is None:
        raise SystemExit("no placement: not a noiseless BERT-style gradient")
    full = [sorted(p) for p in placed]
    inner = [[v for v in row if v != spans.end_id] for row in full]
    lengths = _assign.lengths_from(full, spans.end_id)
    state = _assign.Assignment(spans, inner, lengths, 1e-12, 1e-3, total=spans.tokens)
    rows: list[dict] = []
    start = time.perf_counter()
    plain = _assign.grow

    plain_complete = _assign.complete

    def completed(st: _assign.Assignment, body: list[int]):  # type: ignore[no-untyped-def]
        got = plain_complete(st, body)
        if got is not None:  # the last sequence completed by the key-span repair
            _record(rows, got, st, seqs, start, "completion")
        return got

    def traced(st: _assign.Assignment, body: list[int], sweeps: int):  # type: ignore[no-untyped-def]
        got = plain(st, body, sweeps)
        _record(rows, got, st, seqs, start, "growth")
        return got

    _assign.grow = traced  # the anchored growths call it through the module
    _assign.complete = completed
    try:
        out = _assign.search(state, 8, [], args.restarts, 4, torch.Generator().manual_seed(0))
    finally:
        _assign.grow = plain
        _assign.complete = plain_complete
    res = {
        "text_seed": args.text_seed,
        "n": args.length,
        "true_lengths": [len(s) for s in seqs],
        "token_count": spans.tokens,
        "exact": sum(s in seqs for s, _ in out),
        "accepted": len(state.accepted),
        "accepted_true": sum(s in seqs for s, _ in state.accepted),
        "seconds": time.perf_counter() - start,
        "evaluated": state.evaluated,
        "restarts": rows,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    name = f"transformer_search_trace_seed{args.text_seed}_n{args.length}"
    (OUT / f"{name}.json").write_text(json.dumps(res, indent=2))
    head = {k: v for k, v in res.items() if k != "restarts"}
    lines = [f"# Encoder search trace, MiniLM, {name}", "", "```", json.dumps(head), "```", ""]
    lines += ["| restart | kind | length | J/l | worst | true | accepted before | s |"]
    lines += ["|---" * 8 + "|"]
    for i, r in enumerate(rows):
        lines.append(
            f"| {i} | {r['kind']} | {r['length']} | {r['j_per_position']:.2f} | {r['worst']:.3f} | "
            f"{r['true']} | {r['accepted_before']} | {r['seconds']:.0f} |"
        )
    (OUT / f"{name}.md").write_text("\n".join(lines) + "\n")
    print(head)


if __name__ == "__main__":
    main()
