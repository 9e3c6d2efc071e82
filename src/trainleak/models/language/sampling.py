"""Seeded sampling from a causal language model: temperature, top-k and top-p, several samples
per prompt, prompts of different lengths (left-padded internally), a key-value cache, and one
``torch.Generator`` for every random draw, so a seed reproduces the samples exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainleak.errors import ConfigError
from trainleak.models.language.core import LanguageModel
from trainleak.models.language.scoring import filter_logits


@dataclass(frozen=True)
class Generated:
    """Sampled continuations.

    Attributes:
        tokens: ``(n_prompts, num_samples, max_new_tokens)`` ids, padded after EOS.
        mask: same shape, True on generated tokens (the EOS included).
    """

    tokens: torch.Tensor
    mask: torch.Tensor

    def texts(self, lm: LanguageModel) -> list[list[str]]:
        """The decoded continuations, per prompt then per sample."""
        return [
            [
                str(lm.tokenizer.decode(t[m].tolist(), skip_special_tokens=True))
                for t, m in zip(row_t, row_m)
            ]
            for row_t, row_m in zip(self.tokens, self.mask)
        ]


def generate(
    lm: LanguageModel,
    prompt_ids: Sequence[torch.Tensor],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    num_samples: int = 1,
    generator: torch.Generator | None = None,
    batch_size: int = 64,
) -> Generated:
    """Sample ``num_samples`` continuations of each prompt (1-D id tensors without padding).

    ``temperature=0`` decodes greedily. Rows are processed ``batch_size`` at a time.

    Raises:
        ConfigError: an encoder, no prompt, an empty prompt, bad sampling settings, or prompts
            plus continuation longer than the model's context.
    """
    _check(lm, prompt_ids, max_new_tokens, temperature, top_p, top_k, num_samples, batch_size)
    rows = [p.long() for p in prompt_ids for _ in range(num_samples)]
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    toks, masks = [], []
    was_training = lm.module.training
    lm.module.eval()
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            t, m = _sample_batch(
                lm, rows[start : start + batch_size], max_new_tokens, temperature, top_p, top_k, gen
            )
            toks.append(t)
            masks.append(m)
    lm.module.train(was_training)
    shape = (len(prompt_ids), num_samples, max_new_tokens)
    return Generated(torch.cat(toks).view(shape), torch.cat(masks).view(shape))


def _check(
    lm: LanguageModel,
    prompts: Sequence[torch.Tensor],
    max_new: int,
    temperature: float,
    top_p: float,
    top_k: int,
    num_samples: int,
    batch_size: int,
) -> None:
    if lm.kind != "causal":
        raise ConfigError(f"generate needs a causal language model; {lm.name} is an encoder")
    if len(prompts) == 0:
        raise ConfigError("generate needs at least one prompt")
    if any(p.dim() != 1 or p.numel() == 0 for p in prompts):
        raise ConfigError("every prompt must be a non-empty 1-D tensor of token ids")
    for name, v in (
        ("max_new_tokens", max_new),
        ("num_samples", num_samples),
        ("batch_size", batch_size),
    ):
        if not isinstance(v, int) or v < 1:
            raise ConfigError.invalid(name, "a positive integer", v)
    if not temperature >= 0:
        raise ConfigError.invalid("temperature", "a number >= 0", temperature)
    if not 0 < top_p <= 1:
        raise ConfigError.invalid("top_p", "a number in (0, 1]", top_p)
    if not isinstance(top_k, int) or top_k < 0:
        raise ConfigError.invalid("top_k", "an integer >= 0 (0 = off)", top_k)
    longest = max(int(p.numel()) for p in prompts)
    if longest + max_new > lm.spec.max_length:
        raise ConfigError(
            f"a prompt of {longest} tokens plus {max_new} new tokens exceeds the "
            f"context of {lm.spec.max_length} tokens"
        )


def _sample_batch(
    lm: LanguageModel,
    rows: list[torch.Tensor],
    max_new: int,
    temperature: float,
    top_p: float,
    top_k: int,
    gen: torch.Generator,
) -> tuple[torch.Tensor, ...]:
    pad = int(lm.tokenizer.pad_token_id)
    eos = lm.tokenizer.eos_token_id
    width = max(int(r.numel()) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - r.numel() :] = r
        attn[i, width - r.numel() :] = 1
    pos = (attn.cumsum(1) - 1).clamp_min(0)
    out = lm.module(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True)
    tokens = torch.full((len(rows), max_new), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), max_new), dtype=torch.bool)
    done = torch.zeros(len(rows), dtype=torch.bool)
    last = pos[:, -1]
    for step in range(max_new):
        logits = out.logits[:, -1]
        if temperature == 0:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(filter_logits(logits, temperature, top_p, top_k), dim=-1)
            nxt = torch.multinomial(probs, 1, generator=gen).squeeze(1)
        nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
        tokens[:, step], mask[:, step] = nxt, ~done
        if eos is not None:
            done = done | (nxt == int(eos))
        if step == max_new - 1 or bool(done.all()):
            break
        attn = torch.cat([attn, torch.ones((len(rows), 1), dtype=torch.long)], dim=1)
        last = last + 1
        out = lm.module(
            input_ids=nxt[:, None],
            attention_mask=attn,
            position_ids=last[:, None],
            past_key_values=out.past_key_values,
            use_cache=True,
        )
    return tokens, mask
