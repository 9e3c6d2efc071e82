"""A small GRPO loop (Shao et al., "DeepSeekMath", 2024) for reconstruction rewards, written here
rather than taken from TRL: TRL's trainer drives its own data loading, logging and accelerate
set-up, which at this scale costs more than the loop itself, and the attack needs the policy
between steps (AUROC after every step) and a torch.Generator-seeded sampler.

Per step: draw a batch of prompts; sample a group of G continuations of each from the policy;
score them with the reward; normalise rewards within each group into advantages
A_i = (R_i - mean_G) / (std_G + eps); take one on-policy gradient step on
-mean_i(A_i * mean_t log pi(y_it)) + beta * KL, the KL to a frozen reference estimated per token
with the low-variance k3 estimator exp(d) - d - 1, d = log pi_ref - log pi (Schulman 2020).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from trainleak.models.language import Generated, LanguageModel, generate
from trainleak.progress import Progress, report_every

RewardFn = Callable[[int, str], float]
"""``reward(prompt_index, generated_text) -> float``."""


@dataclass(frozen=True)
class GRPOSettings:
    """GRPO hyper-parameters (validated by the attack that builds them)."""

    steps: int = 40
    prompts_per_step: int = 32
    group: int = 8
    max_new_tokens: int = 24
    lr: float = 1e-4
    kl: float = 0.005
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 50
    micro_batch: int = 64


def token_logps(module: nn.Module, ids: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """``(n, L-1)`` log p(x_t | x_<t) under ``module``."""
    logits = module(input_ids=ids, attention_mask=attn).logits[:, :-1]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def pack(
    prompts: Sequence[torch.Tensor], gen: Generated, pad: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompt + generated tokens per sample, right-padded: ids, attention mask, and the mask of
    generated positions (aligned with ``ids``)."""
    rows = []
    for i, p in enumerate(prompts):
        for s in range(gen.tokens.shape[1]):
            rows.append((p, gen.tokens[i, s][gen.mask[i, s]]))
    width = max(int(p.numel() + g.numel()) for p, g in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    gmask = torch.zeros_like(ids, dtype=torch.bool)
    for r, (p, g) in enumerate(rows):
        n_p, n_g = int(p.numel()), int(g.numel())
        ids[r, :n_p], ids[r, n_p : n_p + n_g] = p, g
        attn[r, : n_p + n_g] = 1
        gmask[r, n_p : n_p + n_g] = True
    return ids, attn, gmask


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``(P, G)`` rewards to advantages normalised within each group (0 for a flat group)."""
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, unbiased=False, keepdim=True)
    return (rewards - mean) / (std + eps)


def grpo_step(
    policy: LanguageModel,
    reference: nn.Module,
    optimizer: torch.optim.Optimizer,
    prompts: Sequence[torch.Tensor],
    reward: Callable[[int, str], float],
    settings: GRPOSettings,
    generator: torch.Generator,
) -> dict[str, float]:
    """One GRPO update on ``prompts`` (reward called with the index into ``prompts``)."""
    t0, c0 = time.perf_counter(), time.process_time()
    gen = generate(
        policy,
        prompts,
        settings.max_new_tokens,
        settings.temperature,
        settings.top_p,
        settings.top_k,
        settings.group,
        generator,
    )
    t_gen = time.perf_counter() - t0
    texts = gen.texts(policy)
    rewards = torch.tensor([[reward(i, t) for t in row] for i, row in enumerate(texts)])
    adv = group_advantages(rewards).reshape(-1)
    ids, attn, gmask = pack(prompts, gen, int(policy.tokenizer.pad_token_id))
    target = gmask[:, 1:].float()
    n_rows = ids.shape[0]
    policy.module.train()
    optimizer.zero_grad(set_to_none=True)
    kl_total = 0.0
    for start in range(0, n_rows, settings.micro_batch):
        sl = slice(start, start + settings.micro_batch)
        logp = token_logps(policy.module, ids[sl], attn[sl])
        with torch.no_grad():
            ref = token_logps(reference, ids[sl], attn[sl])
        m, lengths = target[sl], target[sl].sum(1).clamp_min(1.0)
        pg = -(adv[sl] * (logp * m).sum(1) / lengths).sum()
        d = ref - logp
        k3 = ((torch.exp(d) - d - 1.0) * m).sum(1) / lengths
        loss = (pg + settings.kl * k3.sum()) / n_rows
        loss.backward()
        kl_total += float(k3.detach().sum())
    optimizer.step()
    policy.module.eval()
    return {
        "reward": float(rewards.mean()),
        "kl": kl_total / n_rows,
        "samples": float(n_rows),
        "gen_seconds": t_gen,
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
    }


def run_grpo(
    policy: LanguageModel,
    reference: nn.Module,
    prompts: Sequence[torch.Tensor],
    reward: RewardFn,
    settings: GRPOSettings,
    generator: torch.Generator,
    on_step: Callable[[int], None] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, float]]:
    """``settings.steps`` GRPO steps over random batches of ``prompts``; ``on_step(step)`` runs
    after each (step 1..steps). Returns one trace record per step."""
    params = [p for p in policy.module.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=settings.lr)
    trace = []
    for step in range(1, settings.steps + 1):
        pick = torch.randperm(len(prompts), generator=generator)[: settings.prompts_per_step]
        chosen = [prompts[int(i)] for i in pick]
        index = [int(i) for i in pick]

        def local(j: int, text: str, index: list[int] = index) -> float:
            return reward(index[j], text)

        rec = grpo_step(policy, reference, optimizer, chosen, local, settings, generator)
        trace.append({"step": float(step), **rec})
        if on_step is not None:
            on_step(step)
        report_every(progress, "grpo", step, settings.steps, k=5)
    return trace
