"""Why ADRA and ADRA+ stay near chance on the tiny default ``lm-membership`` target (issue 15).

On the default target (seed 0) this measures, without any RL: how well the released model
reconstructs the true suffixes (best-of-8 and mean-of-8 sampled coverage, greedy coverage,
members vs non-members), the AUROC of the teacher-forced suffix log-likelihood and of Min-K%++,
and, for one rollout of G=8 samples of every prompt with the ADRA+ reward, the share of groups
with a flat reward (zero advantage) and the correlation between the group-normalised advantage
and the coverage of the own suffix (is the GRPO gradient pointing at the own text at all?).

Writes ``benchmarks/results/lm_tiny_diagnosis.json``. Run (about 2 CPU minutes):
``TRAINLEAK_DATA=../shared/data OMP_NUM_THREADS=1 .venv/bin/python
benchmarks/lm_tiny_diagnosis.py``
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from trainleak.attacks.language.grpo import group_advantages
from trainleak.attacks.language.passive import passive_scores, rank_normalise, score_release
from trainleak.attacks.language.reconstruct import (
    Prompts,
    Sampling,
    make_prompts,
    reconstruction_scores,
)
from trainleak.attacks.language.reward import contrastive_reward, coverage
from trainleak.experiments.lm_membership import _settings
from trainleak.experiments.lm_membership_claims import LMMembershipConfig
from trainleak.metrics.membership import auroc
from trainleak.models.language import LanguageModel, encode, generate, token_logprobs
from trainleak.systems.language import build_target

OUT = Path(__file__).parent / "results" / "lm_tiny_diagnosis.json"


def side(v: torch.Tensor, mem: torch.Tensor) -> dict[str, float]:
    """AUROC and the member / non-member means of a score."""
    return {
        "auroc": auroc(v, mem),
        "member_mean": float(v[mem].mean()),
        "nonmember_mean": float(v[~mem].mean()),
        "share_zero": float((v == 0).float().mean()),
    }


def main() -> None:
    rel, split = build_target(_settings(LMMembershipConfig()), 0)
    texts, n = list(split.all_texts), len(split.texts)
    mem = torch.tensor(split.is_member)
    prompts = make_prompts(rel.model, texts, 0.25, 64)
    g = torch.Generator().manual_seed(0)
    sampled = reconstruction_scores(
        rel.model, prompts, Sampling(8, 24, 1.0, 0.95, 50, 128), (2, 6), 1.5, g
    )
    greedy = reconstruction_scores(
        rel.model, prompts, Sampling(1, 24, 0.0, 1.0, 0, 128), (2, 6), 1.5, g
    )
    full = encode(rel.model, texts, 64)
    sc = token_logprobs(rel.model, full.input_ids, full.attention_mask)
    cut = [p.numel() - 1 for p in prompts.ids]
    suffix_ll = torch.stack(
        [
            (sc.logprob[i, c:] * sc.mask[i, c:]).sum() / sc.mask[i, c:].sum()
            for i, c in enumerate(cut)
        ]
    )
    tg, ref, _ = score_release(rel, texts, 64, 32)
    mpp = passive_scores(tg, texts, ref, (0.2,))["minkpp@0.2"]
    out: dict[str, object] = {
        "best_of_8": side(sampled.best[:n], mem),
        "mean_of_8": side(sampled.mean[:n], mem),
        "greedy": side(greedy.best[:n], mem),
        "suffix_loglik_auroc": auroc(suffix_ll[:n], mem),
        "minkpp_auroc": auroc(mpp[:n], mem),
        "grpo_rollout": rollout(rel.model, prompts, rank_normalise(mpp).tolist()),
        "greedy_example_member": greedy.best_text[int(torch.nonzero(mem)[0])],
    }
    OUT.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


def rollout(lm: LanguageModel, prompts: Prompts, prior: list[float]) -> dict[str, float]:
    """One G=8 rollout of every prompt with the ADRA+ reward (K=3 distractors)."""
    n = len(prompts.ids)
    gen = generate(lm, prompts.ids, 24, 1.0, 0.95, 50, 8, torch.Generator().manual_seed(1))
    texts = gen.texts(lm)
    perm = torch.Generator().manual_seed(2)
    others = [
        [j for j in torch.randperm(n, generator=perm).tolist() if j != i][:3] for i in range(n)
    ]
    suf = prompts.suffixes
    reward = torch.tensor(
        [
            [contrastive_reward(t, suf[i], [suf[j] for j in others[i]], prior[i]) for t in row]
            for i, row in enumerate(texts)
        ]
    )
    own = torch.tensor([[coverage(t, suf[i]) for t in row] for i, row in enumerate(texts)])
    flat = reward.std(1) == 0
    adv = group_advantages(reward)[~flat].flatten()
    corr = torch.corrcoef(torch.stack([adv, own[~flat].flatten()]))[0, 1]
    return {
        "mean_reward": float(reward.mean()),
        "mean_own_coverage": float(own.mean()),
        "share_samples_with_zero_own_coverage": float((own == 0).float().mean()),
        "share_flat_groups": float(flat.float().mean()),
        "corr_advantage_own_coverage": float(corr),
    }


if __name__ == "__main__":
    main()
