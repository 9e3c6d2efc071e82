"""Diagnostic (issue 13, seed 10): MIXGUARD against an attacker who pools a record's repeated
encodings, with the links given by an oracle (an upper bound on any linking attack).

MIXGUARD re-draws its secrets (mixing weights, auxiliary rows, sign mask, decoy positions)
for every batch, and a record is sent once per batch it is drawn in: ~24 times over the
experiment's 900 steps (batch 16 from 600 records). Each encoding carries the record's own
hidden state with weight 0.2-0.4 plus two public rows; the public rows differ from one
encoding to the next, so averaging a record's encodings keeps its own part and shrinks the
rest (Carlini et al., "Is Private Learning Possible with Instance Encoding?", IEEE S&P 2021,
broke InstaHide by linking and pooling a record's encodings). The experiment's slot claim is
measured on single encodings (the first 128 rows).

This script trains the default MIXGUARD run while keeping the transcript's first ``--rows``
rows, groups them by record using the ground truth (the ORACLE part: a real attacker must
link them from the encodings alone, which this does not attempt), and aligns each encoding's
real positions by order (also from the ground truth; decoys sit at secret positions). For m
encodings per record it averages the channel magnitudes (MIXGUARD's sign mask leaves them
unchanged) and decodes the average with an inverter trained the adaptive way: on public rows
encoded m times by the public algorithm with the attacker's own secrets, averaged the same way.
m = 1 is the experiment's adaptive inverter on single encodings. Scores: slot recovery and
token recovery at the real positions of the linked records, slot chance 1 / pool_size.

Usage:
    python benchmarks/split_llm_linking.py [--seed 0] [--rows 6400] [--m 1 2 4 8 16]

Writes ``benchmarks/results/split_llm_linking.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

from trainleak.attacks.split_lm._common import (
    N_SPECIAL,
    embedding_table,
    fit_inverter,
    random_rows,
)
from trainleak.defenses.split_text import obfuscate
from trainleak.experiments.split_llm_mixguard import settings, training_config, world
from trainleak.experiments.split_llm_mixguard_claims import SplitLLMMixGuardConfig
from trainleak.models.split_lm import LMSplit, SplitLM
from trainleak.releases.split_text import TextDefenseSpec
from trainleak.scenarios.split_llm import run_defense

OUT = Path(__file__).resolve().parent / "results"


def estimated_signs(hidden: torch.Tensor, mask: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """A batch's secret sign mask as the attacker estimates it, from the batch alone: every
    row of a batch shares one mask, and the mixed states' channel means stay those of the
    public bottom's outputs (the mixing weights sum to one), so the sign of each channel's
    batch mean against the public mean ``mu`` reads the mask off where ``mu`` is far from 0."""
    keep = mask.bool()
    mean = hidden[keep].mean(0)
    return torch.where(mean * mu >= 0, 1.0, -1.0)


def read(hidden: torch.Tensor, signs: torch.Tensor | None) -> torch.Tensor:
    """The attacker's features: channel magnitudes, or the states with estimated signs undone."""
    return hidden.abs() if signs is None else hidden * signs


def oracle_groups(ids: torch.Tensor, real: torch.Tensor) -> dict[tuple[int, ...], list[int]]:
    """ORACLE linking: rows with the same real-token sequence are one record."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for r in range(ids.shape[0]):
        groups.setdefault(tuple(ids[r][real[r]].tolist()), []).append(r)
    return groups


def linked_records(
    smashed: torch.Tensor,
    real: torch.Tensor,
    groups: dict[tuple[int, ...], list[int]],
    m: int,
    signs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """ORACLE linking: rows with the same real-token sequence are one record. For each record
    seen at least ``m`` times, the mean feature (:func:`read`, ``signs`` per row) of its first
    ``m`` encodings at its real positions (aligned by order); returns ``(features (P, d),
    tokens (P,), records)``."""
    feats, toks, n = [], [], 0
    for key, rows in groups.items():
        if len(rows) < m:
            continue
        stack = torch.stack(
            [read(smashed[r][real[r]], None if signs is None else signs[r]) for r in rows[:m]]
        )  # (m, n_real, d)
        feats.append(stack.mean(0))
        toks.append(torch.tensor(key))
        n += 1
    if not feats:
        return torch.zeros(0, smashed.shape[-1]), torch.zeros(0, dtype=torch.long), 0
    return torch.cat(feats), torch.cat(toks), n


def simulated_pairs(
    bottom: SplitLM,
    ids: torch.Tensor,
    spec: TextDefenseSpec,
    m: int,
    gen: torch.Generator,
    batch: int = 16,
    mu: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The adaptive attacker's training pairs: each public row encoded ``m`` times by the
    public algorithm with fresh secrets of its own (in batches of the client's size), features
    (:func:`read`: magnitudes, or with ``mu`` the signs estimated per batch as from the
    transcript) averaged over the encodings at the row's real positions (its own decoys, which
    it knows, dropped)."""
    tok = bottom.lm.tokenizer
    pad = int(tok.pad_token_id)
    feats, toks = [], []
    with torch.no_grad():
        for s in range(0, ids.shape[0], batch):
            part = ids[s : s + batch]
            mask = (part != pad).long()
            mask[:, 0] = 1
            obs = [
                obfuscate(spec, part, mask, bottom.bottom, ids, len(tok), pad, gen)
                for _ in range(m)
            ]
            sg = [None if mu is None else estimated_signs(ob.hidden, ob.mask, mu) for ob in obs]
            for r in range(part.shape[0]):
                stack = torch.stack([read(ob.hidden[r][ob.real[r]], g) for ob, g in zip(obs, sg)])
                feats.append(stack.mean(0))
                toks.append(obs[0].ids[r][obs[0].real[r]])
    return torch.cat(feats), torch.cat(toks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=6400, help="transcript rows kept")
    parser.add_argument("--m", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--inverter-steps", type=int, default=600)
    parser.add_argument(
        "--signs",
        choices=["magnitude", "estimate"],
        default="magnitude",
        help="read channel magnitudes, or estimate each batch's sign mask and undo it",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    cfg = SplitLLMMixGuardConfig(seed=args.seed)
    w = world(cfg)
    split = LMSplit(cfg.bottom_end, cfg.top_start)
    tcfg = dataclasses.replace(training_config(cfg), record_rows=args.rows)
    spec = settings(cfg)["mixguard"]
    run, acc = run_defense(w, split, spec, tcfg, cfg.seed)
    tr = run.transcript
    smashed, ids, real = tr.smashed, run.truth.ids, run.truth.real.bool()
    bottom = SplitLM(tr.public_lm, tr.split)
    table = embedding_table(tr)
    gen = torch.Generator().manual_seed(1000 + args.seed)
    pad = int(w.lm.tokenizer.pad_token_id)
    public = torch.cat(
        [w.public_ids, random_rows(w.public_ids, len(w.public_ids), len(w.lm.tokenizer), gen, pad)]
    )
    mu = row_signs = None
    if args.signs == "estimate":
        with torch.no_grad():
            pm = (w.public_ids != pad).long()
            pm[:, 0] = 1
            mu = bottom.bottom(w.public_ids, pm)[pm.bool()].mean(0)
        row_signs = torch.zeros(len(ids), smashed.shape[-1])
        for t in tr.step.unique():
            at = tr.step == t
            row_signs[at] = estimated_signs(smashed[at], tr.mask[at], mu)
    groups = oracle_groups(ids, real)
    rows_out = []
    for m in args.m:
        feats, toks, n_rec = linked_records(smashed, real, groups, m, row_signs)
        if n_rec == 0:
            rows_out.append({"m": m, "records": 0})
            continue
        h, t = simulated_pairs(bottom, public, spec, m, gen, mu=mu)
        keep = torch.ones(len(t), dtype=torch.bool)
        inv = fit_inverter((h, t, keep), table, args.inverter_steps, 3e-3, 256, 256, gen)
        with torch.no_grad():
            pred = inv(feats).argmax(-1)
        slots = torch.isin(toks, w.slot_ids)
        body = toks >= N_SPECIAL
        row = {
            "m": m,
            "records": n_rec,
            "slot_positions": int(slots.sum()),
            "slot_recovery": float((pred == toks)[slots].float().mean()),
            "token_recovery": float((pred == toks)[body].float().mean()),
        }
        rows_out.append(row)
        print(json.dumps(row), flush=True)
    out = {
        "seed": args.seed,
        "rows": int(ids.shape[0]),
        "steps_covered": int(tr.step.max()) + 1,
        "encodings_per_record_median": float(
            torch.tensor([len(g) for g in groups.values()]).float().median()
        ),
        "mixguard_accuracy": acc,
        "slot_chance": 1.0 / w.pool_size,
        "lam0": [cfg.lam0_low, cfg.lam0_high],
        "signs": args.signs,
        "results": rows_out,
        "seconds": time.perf_counter() - start,
        "note": "ORACLE linking and alignment from the ground truth: an upper bound on a "
        "linking attack, not an attack",
    }
    OUT.mkdir(exist_ok=True)
    path = OUT / "split_llm_linking.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    old[f"seed{args.seed}-{args.signs}"] = out
    path.write_text(json.dumps(old, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "results"}))


if __name__ == "__main__":
    main()
