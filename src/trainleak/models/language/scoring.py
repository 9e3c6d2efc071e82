"""One forward pass per batch: per-token log-probabilities and the moments of the next-token
distribution; and seeded sampling with temperature, top-p and top-k.

:func:`token_logprobs` gives, for every position t >= 1 of every sequence, log p(x_t | x_<t) and
the mean and variance of log p(z) for z drawn from the model's next-token distribution at t.
These are all that loss, zlib, Min-K% (Shi et al. 2024) and Min-K%++ (Zhang et al. 2025) need.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.language.core import LanguageModel, vocab_rows


@dataclass(frozen=True)
class TokenScores:
    """Per-token scores of ``n`` sequences of ``length`` tokens (positions 1..length-1).

    Attributes:
        logprob: ``(n, length-1)`` log p(x_t | x_<t) of the actual next token.
        mean: ``(n, length-1)`` E_z[log p(z | x_<t)] under the next-token distribution.
        var: ``(n, length-1)`` Var_z[log p(z | x_<t)].
        mask: ``(n, length-1)`` bool, True where x_t is a real (non-padding) token.
    """

    logprob: torch.Tensor
    mean: torch.Tensor
    var: torch.Tensor
    mask: torch.Tensor

    def lengths(self) -> torch.Tensor:
        """Number of scored tokens per sequence."""
        return self.mask.sum(dim=1)


def check_ids(lm: LanguageModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
    """Refuse id matrices that do not fit ``lm`` (shape, range)."""
    if input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
        raise ShapeError(
            f"input_ids and attention_mask must be the same (n, length) shape, got "
            f"{tuple(input_ids.shape)} and {tuple(attention_mask.shape)}"
        )
    vocab = vocab_rows(lm.module)
    if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab):
        raise ConfigError(
            f"token ids must lie in [0, {vocab}): the ids do not belong to {lm.name}'s vocabulary"
        )


PRECISIONS: tuple[str, ...] = ("float32", "bfloat16")
STATS_CHUNK = 16
"""Positions whose full-vocabulary statistics are computed together: 16 x 49152 float32 values
(3 MiB) stay in cache; one pass over a whole batch's logits is about 4x slower on SmolLM2."""


def next_token_stats(
    logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From logits ``(..., V)`` predicting ``targets`` ``(...)``: the target log-prob and the mean
    and variance of log p under the softmax distribution (computed in float32)."""
    x = logits.float()
    logp = x - torch.logsumexp(x, dim=-1, keepdim=True)
    plogp = logp.exp() * logp
    mean = plogp.sum(-1)
    var = (plogp * logp).sum(-1) - mean.square()
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1), mean, var.clamp_min(0.0)


def _batch_stats(
    logits: torch.Tensor, ids: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`next_token_stats` of every real position of a right-padded batch, in chunks of
    :data:`STATS_CHUNK` positions (padding skipped); ``(b, width-1)`` each, 0 on padding."""
    b, width = ids.shape
    out = torch.zeros((3, b, width - 1), device=logits.device)
    for row in range(b):
        n = int(lengths[row]) - 1
        for s in range(0, n, STATS_CHUNK):
            e = min(s + STATS_CHUNK, n)
            lp, mu, var = next_token_stats(logits[row, s:e], ids[row, s + 1 : e + 1])
            out[0, row, s:e], out[1, row, s:e], out[2, row, s:e] = lp, mu, var
    return out[0], out[1], out[2]


def token_logprobs(
    lm: LanguageModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    batch_size: int = 16,
    *,
    precision: str = "float32",
) -> TokenScores:
    """Per-token log-probs and next-token moments of a causal ``lm``, one forward pass per batch
    of ``batch_size`` sequences; padding is masked out.

    Sequences are batched in order of length and each batch is cut to its longest sequence
    (right padding never changes a causal model's outputs on real tokens), so mixed lengths
    cost little padding. ``precision="bfloat16"`` runs the forward pass under CPU/GPU autocast
    in bfloat16 (about 3x faster on CPUs with AVX512-BF16; the statistics stay float32). On
    SmolLM2 it moves per-token log-probs by 0.03 nats on average but by several nats on rare
    tokens, and Min-K%++ scores by up to about 0.26 (``benchmarks/lm_membership.py`` measures
    it against float32), so float32 is the default.
    """
    if lm.kind != "causal":
        raise ConfigError(f"token_logprobs needs a causal language model; {lm.name} is an encoder")
    if batch_size < 1:
        raise ConfigError.invalid("batch_size", "a positive integer", batch_size)
    if precision not in PRECISIONS:
        raise ConfigError.invalid("precision", f"one of {PRECISIONS}", precision)
    check_ids(lm, input_ids, attention_mask)
    n, width = input_ids.shape
    lengths = attention_mask.sum(1)
    order = torch.argsort(lengths, descending=True, stable=True)
    out = torch.zeros((3, n, max(width - 1, 0)))
    was_training = lm.module.training
    lm.module.eval()
    device = next(lm.module.parameters()).device
    with torch.inference_mode(), _autocast(device, precision):
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            w = max(int(lengths[idx].max()), 1)
            ids, mask = input_ids[idx, :w].to(device), attention_mask[idx, :w].to(device)
            logits = lm.module(input_ids=ids, attention_mask=mask).logits
            lp, mu, var = _batch_stats(logits, ids, lengths[idx])
            out[:, idx, : w - 1] = torch.stack([lp, mu, var]).cpu()
    lm.module.train(was_training)
    valid = (attention_mask[:, 1:] * attention_mask[:, :-1]).bool()
    return TokenScores(out[0].clone(), out[1].clone(), out[2].clone(), valid)


def _autocast(device: torch.device, precision: str) -> torch.autocast:
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")


def sequence_logprob(
    module: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    score_mask: torch.Tensor,
) -> torch.Tensor:
    """Differentiable sum of log p(x_t | x_<t) over positions where ``score_mask[:, t]`` is set
    (``score_mask`` is ``(n, length)``, aligned with ``input_ids``); used by fine-tuning and RL."""
    logits = module(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    logp = torch.log_softmax(logits.float(), dim=-1)
    tok = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return (tok * score_mask[:, 1:].to(tok.dtype)).sum(dim=1)


def filter_logits(
    logits: torch.Tensor, temperature: float, top_p: float, top_k: int
) -> torch.Tensor:
    """Logits after temperature, top-k (0 = off) and nucleus top-p filtering (Holtzman et al.
    2020); removed entries are ``-inf``."""
    logits = logits.float() / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        # Drop a token when the mass before it already reaches top_p (the first always stays).
        drop = (probs.cumsum(-1) - probs) >= top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return logits
