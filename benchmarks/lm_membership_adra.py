"""ADRA+ against Min-K%++ on a LoRA fine-tune of SmolLM2-135M (issue 15), CPU, small scale.

The target is SmolLM2 fine-tuned (LoRA, merged) on WikiText-2 test windows (the members and
the labelled calibration members); the non-members are other windows of the same split. Every
passive score comes from one shared pass; ADRA+ runs GRPO on the unlabelled pool (test and
calibration candidates), and its step budget is chosen on the calibration split only
(``scenarios.language.choose_step``). Step 0 of the RL curve is n-sampling with the same
sampler. Reports every score's AUROC with a 95% bootstrap interval, the paired interval of
AUROC(ADRA+) - AUROC(Min-K%++), the RL throughput (samples per second, share of RL time in
generation) and, as a precision check, the passive AUROCs with the bfloat16 forward pass.

Writes ``benchmarks/results/lm_membership_adra.json`` (``lm_membership.py`` renders it into
``lm_membership.md``). Run (about 10-15 CPU minutes at the defaults, one thread):
``TRAINLEAK_DATA=../shared/data OMP_NUM_THREADS=1 .venv/bin/python
benchmarks/lm_membership_adra.py``
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time
from pathlib import Path

import torch

from trainleak.attacks import get_attack
from trainleak.attacks.language.passive import passive_scores
from trainleak.data.text import load_wikitext2
from trainleak.metrics.membership import auroc, tpr_at_fpr
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


def make_split(n: int, c: int, words: int) -> tuple[MembershipSplit, list[str]]:
    """``n`` members and ``n`` non-members (shuffled), ``c`` + ``c`` calibration candidates;
    returns the split and the fine-tuning texts (members and calibration members)."""
    cands = candidate_windows(load_wikitext2("test"), words, seed=1)
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
    return split, mem + cal_m


def passive(
    rel: LanguageModelRelease, texts: list[str], precision: str
) -> tuple[dict[str, torch.Tensor], float]:
    """Every passive score (one shared pass per model) and its CPU seconds."""
    cpu = time.process_time()
    outs = []
    for lm in (rel.model, rel.reference or rel.model):
        enc = encode(lm, texts, 64)
        outs.append(token_logprobs(lm, enc.input_ids, enc.attention_mask, 16, precision=precision))
    return passive_scores(outs[0], texts, outs[1]), time.process_time() - cpu


def fine_tune_until(
    rel: LanguageModelRelease,
    train: list[str],
    texts: list[str],
    mem: torch.Tensor,
    args: argparse.Namespace,
) -> tuple[list[float], dict[int, float]]:
    """Build the target: LoRA fine-tune in chunks of ``--ft-chunk`` steps (each chunk's adapter
    merged) until the Min-K%++ (k=0.2) AUROC of the test candidates reaches ``--stop-at`` or
    ``--ft-steps`` steps are done, so the passive scores land in an informative range (a few
    passes over 32-word members already give AUROC 1.0 for every passive score). The stopping
    rule reads test labels on the target-builder side and favours Min-K%++, so it makes the
    ADRA+ comparison harder, not easier."""
    losses: list[float] = []
    curve: dict[int, float] = {}
    lora = LoraSettings(r=16, alpha=32)
    while len(losses) < args.ft_steps:
        n = min(args.ft_chunk, args.ft_steps - len(losses))
        losses += fine_tune(
            rel.model, train, n, args.ft_lr, 8, lora=lora, seed=len(losses), max_length=64
        )
        enc = encode(rel.model, texts, 64)
        tg = token_logprobs(rel.model, enc.input_ids, enc.attention_mask, 16)
        curve[len(losses)] = auroc(passive_scores(tg, texts, None, (0.2,))["minkpp@0.2"], mem)
        print(
            f"fine-tune step {len(losses)}: loss {losses[-1]:.3f}, Min-K%++ AUROC "
            f"{curve[len(losses)]:.3f}",
            flush=True,
        )
        if curve[len(losses)] >= args.stop_at:
            break
    return losses, curve


def summary(s: torch.Tensor, mem: torch.Tensor) -> dict[str, object]:
    """AUROC, its 95% bootstrap interval and TPR at 1% FPR."""
    lo, hi = auroc_interval(s, mem, 0.95, n_boot=1000, seed=0)
    return {"auroc": auroc(s, mem), "interval": [lo, hi], "tpr_at_1pct": tpr_at_fpr(s, mem, 0.01)}


def run(args: argparse.Namespace) -> dict[str, object]:
    t0, c0 = time.perf_counter(), time.process_time()
    base = load_smollm2()
    split, train = make_split(args.n_members, args.n_calibration, args.words)
    target = LanguageModel(
        copy.deepcopy(base.module), base.tokenizer, "causal", "smollm2-finetuned", base.spec
    )
    rel = LanguageModelRelease(model=target, reference=base)
    texts, mem = list(split.texts), torch.tensor(split.is_member)
    k = len(texts)
    c = time.process_time()
    losses, curve = fine_tune_until(rel, train, texts, mem, args)
    ft_cpu = time.process_time() - c
    scores, passive_cpu = passive(rel, texts, "float32")
    scores_bf16, passive_bf16_cpu = passive(rel, texts, "bfloat16")
    print({key: round(auroc(v, mem), 3) for key, v in scores.items()}, flush=True)
    params = {
        "steps": args.rl_steps,
        "prompts_per_step": args.prompts,
        "group": args.group,
        "n_samples": args.samples,
        "max_new_tokens": args.new_tokens,
        "eval_every": args.eval_every,
        "lr": args.rl_lr,
        "lora_r": 16,
        "micro_batch": 16,
        "batch_size": 64,
        "max_length": 96,
    }
    c = time.process_time()
    rec = get_attack("adra-plus", **params)(rel, pool_knowledge(split), seed=0)
    rl_cpu = time.process_time() - c
    d = rec.diagnostics
    steps = {int(s): torch.tensor(v) for s, v in d["scores_per_step"].items()}
    cal_mem = torch.tensor(split.calibration_is_member)
    chosen, calib = choose_step({s: v[k:] for s, v in steps.items()}, cal_mem)
    adra = steps[chosen][:k]
    mpp = scores["minkpp@0.2"]
    methods = {**scores, "n-sampling (step 0)": steps[0][:k], "adra-plus": adra}
    return {
        "members": args.n_members,
        "nonmembers": args.n_members,
        "calibration": 2 * args.n_calibration,
        "words": args.words,
        "finetune_steps": len(losses),
        "finetune_minkpp_curve": curve,
        "finetune_stop_at": args.stop_at,
        "finetune_lr": args.ft_lr,
        "finetune_loss_first_last": [losses[0], losses[-1]],
        "finetune_cpu_seconds": ft_cpu,
        "passive_cpu_seconds": passive_cpu,
        "passive_bf16_cpu_seconds": passive_bf16_cpu,
        "rl_cpu_seconds": rl_cpu,
        "scores": {m: summary(v, mem) for m, v in methods.items()},
        "bf16_auroc": {m: auroc(v, mem) for m, v in scores_bf16.items()},
        "bf16_max_score_change": {
            m: float((scores_bf16[m] - v).abs().max()) for m, v in scores.items()
        },
        "adra_minus_minkpp": [
            auroc(adra, mem) - auroc(mpp, mem),
            *auroc_difference_interval(adra, mpp, mem, 0.95, n_boot=1000, seed=0),
        ],
        "chosen_step": chosen,
        "calibration_auroc_per_step": calib,
        "test_auroc_per_step": {s: auroc(v[:k], mem) for s, v in steps.items()},
        "mean_reward_per_step": [float(r["reward"]) for r in rec.trace],
        "rl_samples_per_second": d["rl_samples_per_second"],
        "rl_samples_per_cpu_second": d.get("rl_samples_per_cpu_second"),
        "generation_share": d["generation_share"],
        "rl_seconds": d["rl_seconds"],
        "rl_params": params,
        "examples": example_texts(split, d["best_text_per_step"][chosen]),
        "wall_seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
        "threads": torch.get_num_threads(),
    }


def example_texts(split: MembershipSplit, best: list[str]) -> list[dict[str, object]]:
    """Two members and two non-members: the true text and ADRA+'s best continuation."""
    out: list[dict[str, object]] = []
    for want in (True, False):
        idx = [i for i, m in enumerate(split.is_member) if m == want][:2]
        out += [{"member": want, "text": split.texts[i], "best": best[i]} for i in idx]
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n-members", type=int, default=24)
    p.add_argument("--n-calibration", type=int, default=8)
    p.add_argument("--words", type=int, default=32)
    p.add_argument("--ft-steps", type=int, default=24)
    p.add_argument("--ft-chunk", type=int, default=2)
    p.add_argument("--stop-at", type=float, default=0.75)
    p.add_argument("--ft-lr", type=float, default=5e-4)
    p.add_argument("--rl-steps", type=int, default=6)
    p.add_argument("--rl-lr", type=float, default=1e-3)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=24)
    p.add_argument("--eval-every", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=OUT / "lm_membership_adra.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    res = {"args": {k: str(v) for k, v in vars(args).items()}, **run(args)}
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1, default=float))
    print(json.dumps({k: v for k, v in res.items() if k != "examples"}, default=float))


if __name__ == "__main__":
    main()
