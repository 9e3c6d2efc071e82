"""Diagnostic (issue 13, seed 10): do the backward gradients in a split-LM transcript tell the
server anything about the private tokens that the forward hidden states do not? An
oracle-trained reader, as an upper bound for learned readers.

BiSR (Chen et al., CCS 2024) refines its guesses by matching both the forward hidden states
and the backward gradients the server receives. ``split-lm-bisr`` matches the forward states
only, for this reason: the gradient at the trunk output is ``g = dL/dz`` of the client's loss on
its top's input. Without MIXGUARD's calibrator that input *is* the trunk output ``z``, which the
server computed itself, so ``g`` is a function of ``z``, the client's private top, head and
label: it carries nothing about the tokens that ``z`` (hence the received hidden states) does
not (in language-model fine-tuning the labels are the tokens and ``g`` does carry them; here
they are template classes). Under MIXGUARD the client's calibrator also reads its own clean
bottom output, so ``g`` *can* carry the clean tokens; this script measures how much.

Per setting it trains the experiment's split run (defaults of ``split-llm-mixguard``) for
``--steps`` steps keeping every row of the transcript, and trains per-position readers (an MLP
to the vocabulary) on three quarters of the private records' rows *with their true tokens* (the
oracle part: no attacker has these labels), tested on the remaining records' rows: on the
hidden states (channel magnitudes under MIXGUARD's sign mask), on the gradients, jointly on
both, and as a product of the two readers' distributions with the gradient's weight chosen on
a validation quarter of the training records. Scores: slot recovery and token recovery at the
real positions, slot chance 1 / pool_size.

Usage:
    python benchmarks/split_llm_backward.py [--seeds 0 1] [--settings none mixup noise-1
        mixguard] [--steps 120]

Writes ``benchmarks/results/split_llm_backward.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch
from torch import nn

from trainleak.experiments.split_llm_mixguard import settings, training_config, world
from trainleak.experiments.split_llm_mixguard_claims import SplitLLMMixGuardConfig
from trainleak.models.split_lm import LMSplit
from trainleak.releases.split_text import TextDefenseSpec
from trainleak.scenarios.split_llm import World
from trainleak.systems.split_lm import train_split

OUT = Path(__file__).resolve().parent / "results"
BETAS = (0.0, 0.1, 0.25, 0.5, 1.0)


def magnitudes(x: torch.Tensor, spec: TextDefenseSpec) -> torch.Tensor:
    """Channel magnitudes under a secret sign mask (it flips gradients as it flips states),
    then each row scaled to unit RMS (MIXGUARD clips gradient rows to the batch median)."""
    if spec.kind == "mixguard" and spec.signs:
        x = x.abs()
    return x / x.pow(2).mean((1, 2), keepdim=True).sqrt().clamp_min(1e-12)


def reader(
    feat: torch.Tensor, y: torch.Tensor, train: torch.Tensor, vocab: int, seed: int
) -> torch.Tensor:
    """Log-probabilities over the vocabulary of every position, from an MLP trained on the
    ``train`` positions' true tokens."""
    x = feat.flatten(0, 1)
    mu, sd = x[train].mean(0), x[train].std(0).clamp_min(1e-6)
    x = (x - mu) / sd
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(x.shape[1], 256), nn.GELU(), nn.Linear(256, vocab))
    opt = torch.optim.Adam(net.parameters(), 3e-3, weight_decay=1e-4)
    xt, yt = x[train], y[train]
    for _ in range(1500):
        idx = torch.randint(0, xt.shape[0], (256,), generator=gen)
        loss = nn.functional.cross_entropy(net(xt[idx]), yt[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        return net(x).log_softmax(1)


def measure(w: World, cfg: SplitLLMMixGuardConfig, name: str, steps: int) -> dict[str, object]:
    t0 = time.time()
    spec = settings(cfg)[name]
    tcfg = dataclasses.replace(
        training_config(cfg), steps=steps, record_rows=steps * cfg.batch_size
    )
    split = LMSplit(cfg.bottom_end, cfg.top_start)
    run = train_split(w.lm, split, w.train, w.public_ids, spec, tcfg, cfg.seed)
    tr, ids, real = run.transcript, run.truth.ids, run.truth.real
    n, length = ids.shape
    # Records (not rows) are split: a record drawn twice lies on one side only.
    quarter = torch.tensor([hash(tuple(ids[i][real[i]].tolist())) % 4 for i in range(n)])
    part = quarter.repeat_interleave(length)
    y, keep = ids.flatten(), real.flatten()
    slot = torch.isin(ids, w.slot_ids).flatten()
    test, val, train = keep & (part == 0), keep & (part == 1), keep & (part >= 2)
    vocab = len(w.lm.tokenizer)
    fh, fg = magnitudes(tr.smashed, spec), magnitudes(tr.body_grads, spec)
    lh = reader(fh, y, train, vocab, cfg.seed)
    lg = reader(fg, y, train, vocab, cfg.seed)
    joint = reader(torch.cat([fh, fg], -1), y, train, vocab, cfg.seed)

    def acc(lp: torch.Tensor, m: torch.Tensor) -> float:
        return float((lp[m].argmax(1) == y[m]).float().mean())

    # The gradient's weight in the product: best validation slot recovery, then tokens.
    score = [(acc(lh + b * lg, val & slot), acc(lh + b * lg, val)) for b in BETAS]
    beta = BETAS[max(range(len(BETAS)), key=lambda i: score[i])]
    return {
        "setting": name,
        "seed": cfg.seed,
        "steps": steps,
        "rows": n,
        "test_slots": int((test & slot).sum()),
        "slot_chance": 1.0 / w.pool_size,
        "forward": {"tokens": acc(lh, test), "slots": acc(lh, test & slot)},
        "backward": {"tokens": acc(lg, test), "slots": acc(lg, test & slot)},
        "joint": {"tokens": acc(joint, test), "slots": acc(joint, test & slot)},
        "product": {
            "beta": beta,
            "tokens": acc(lh + beta * lg, test),
            "slots": acc(lh + beta * lg, test & slot),
        },
        "seconds": round(time.time() - t0, 1),
    }


def table(rows: list[dict[str, object]]) -> str:
    head = (
        "| setting | seed | forward tok / slots | backward tok / slots | joint tok / slots "
        "| product (beta) tok / slots | slot chance |\n|---|---|---|---|---|---|---|\n"
    )
    body = []
    for r in rows:
        cells = [
            f"{r[k]['tokens']:.3f} / {r[k]['slots']:.3f}" for k in ("forward", "backward", "joint")
        ]  # type: ignore[index]
        p = r["product"]
        body.append(
            f"| {r['setting']} | {r['seed']} | {' | '.join(cells)} | ({p['beta']}) "  # type: ignore[index]
            f"{p['tokens']:.3f} / {p['slots']:.3f} | {r['slot_chance']:.3f} |"  # type: ignore[index]
        )
    return head + "\n".join(body) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--settings", nargs="+", default=["none", "mixup", "noise-1", "mixguard"])
    parser.add_argument("--steps", type=int, default=120)
    args = parser.parse_args()
    t0 = time.time()
    rows = []
    for seed in args.seeds:
        cfg = SplitLLMMixGuardConfig(seed=seed)
        w = world(cfg)
        for name in args.settings:
            rows.append(measure(w, cfg, name, args.steps))
            print(json.dumps(rows[-1]), flush=True)
    OUT.mkdir(exist_ok=True)
    out = {"args": vars(args), "wall_s": round(time.time() - t0, 1), "results": rows}
    (OUT / "split_llm_backward.json").write_text(json.dumps(out, indent=1))
    (OUT / "split_llm_backward.md").write_text(
        "# Backward gradients in the split-LM transcript: oracle-trained readers\n\n"
        "`python benchmarks/split_llm_backward.py` (see its docstring); readers trained on "
        "the private records' true tokens, tested on held-out records.\n\n" + table(rows)
    )


if __name__ == "__main__":
    main()
