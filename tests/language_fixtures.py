"""Tiny random BERT and GPT-2 language models (the LM substrate's, with trained-like
LayerNorms) over a word tokenizer, and FedSGD releases of them, for fast tests."""

from __future__ import annotations

import functools

import torch

from trainleak.models.language import (
    LanguageModel,
    tiny_causal_lm,
    tiny_encoder,
    train_word_tokenizer,
)
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.transformer_update import TransformerUpdate
from trainleak.scenarios.transformer_gradients import client_release, trained_like
from trainleak.systems.transformer_clients import TextBatch

WORDS = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "it",
    "that",
    "this",
    "film",
    "series",
    "game",
    "song",
    "album",
    "river",
    "city",
    "war",
    "team",
    "season",
    "year",
    "first",
    "new",
    "old",
    "played",
    "wrote",
    "built",
    "opened",
    "moved",
    "won",
    "lost",
    "began",
    "ended",
]


def random_texts(count: int, seed: int, low: int = 3, high: int = 6) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        n = int(torch.randint(low, high + 1, (1,), generator=g))
        out.append(" ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (n,), generator=g)))
    return out


@functools.cache
def _tokenizer():  # type: ignore[no-untyped-def]
    return train_word_tokenizer([" ".join(WORDS)], 64, 0)


def tiny_bert(seed: int = 0, width: int = 64) -> LanguageModel:
    lm = tiny_encoder(
        _tokenizer(), num_labels=2, n_layer=3, hidden=width, heads=2, max_length=16, seed=seed
    )
    return trained_like(lm, seed, 0.1)


def tiny_gpt2(seed: int = 0, width: int = 64) -> LanguageModel:
    lm = tiny_causal_lm(_tokenizer(), n_layer=2, n_embd=width, n_head=2, max_length=16, seed=seed)
    return trained_like(lm, seed)


def tiny_release(
    kind: str = "encoder", batch: int = 3, length: int = 8, noise: float = 0.0, seed: int = 0
) -> tuple[TextBatch, TransformerUpdate]:
    lm = tiny_bert() if kind == "encoder" else tiny_gpt2()
    return client_release(lm, random_texts(batch, seed), length, noise=noise, seed=seed)


def tiny_transformer_update() -> tuple[TransformerUpdate, Knowledge]:
    """A noiseless encoder release of 2 sequences (conformance)."""
    return tiny_release(batch=2, length=6)[1], Knowledge()
