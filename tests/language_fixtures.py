"""Tiny language-model fixtures for fast tests (seconds), on the LM substrate.

Membership (issue 15): a word tokenizer on a toy corpus, a base model pre-trained briefly on
public sentences, and a release fine-tuned hard on members. Transformer gradients (issue 14):
tiny random BERT and GPT-2 models (with trained-like LayerNorms) over a word tokenizer, and
FedSGD releases of them.
"""

from __future__ import annotations

import copy
import functools
from functools import lru_cache

import torch

from trainleak.attacks.transformer._assign import lengths_from
from trainleak.attacks.transformer._localise import placed_candidates
from trainleak.attacks.transformer._spans import build_spans
from trainleak.models.language import (
    LanguageModel,
    fine_tune,
    tiny_causal_lm,
    tiny_encoder,
    train_word_tokenizer,
)
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.language import LanguageModelRelease
from trainleak.releases.transformer_update import TransformerUpdate
from trainleak.scenarios.transformer_gradients import client_release, trained_like
from trainleak.systems.transformer_clients import TextBatch

_NOUNS = ["cat", "dog", "bird", "horse", "fish", "fox", "owl", "bear", "wolf", "mouse"]
_PLACES = ["garden", "river", "forest", "city", "field", "market", "valley", "harbour"]
_VERBS = ["walked", "slept", "sang", "waited", "played", "looked", "ran", "sat"]


def toy_sentence(i: int) -> str:
    """A deterministic 12-word toy sentence (distinct for distinct ``i`` below 640)."""
    n, p, v = _NOUNS[i % 10], _PLACES[(i // 10) % 8], _VERBS[(i // 80) % 8]
    m = _NOUNS[(i * 7 + 3) % 10]
    return f"the {n} {v} near the {p} while the {m} {_VERBS[(i * 3) % 8]} in the {_PLACES[i % 8]}"


@lru_cache(maxsize=2)
def toy_language_release(
    n_members: int = 8, finetune_steps: int = 60
) -> tuple[LanguageModelRelease, tuple[str, ...], tuple[bool, ...]]:
    """A release over-fitted on ``n_members`` toy sentences, its reference, and a candidate
    pool of the members and as many non-members (alternating), with labels."""
    members = [toy_sentence(i) for i in range(0, 4 * n_members, 4)]
    non = [toy_sentence(i) for i in range(2, 4 * n_members + 2, 4)]
    public = [toy_sentence(i) for i in range(200, 320)]
    tok = train_word_tokenizer(public + members + non, vocab_size=64, seed=0)
    base = tiny_causal_lm(tok, n_layer=1, n_embd=32, n_head=2, max_length=32, seed=0)
    fine_tune(base, public, steps=40, lr=3e-3, batch_size=16, seed=0)
    target = LanguageModel(copy.deepcopy(base.module), tok, "causal", "toy-target", base.spec)
    fine_tune(target, members, steps=finetune_steps, lr=3e-3, batch_size=8, seed=1)
    texts = tuple(t for pair in zip(members, non) for t in pair)
    labels = tuple(i % 2 == 0 for i in range(len(texts)))
    return LanguageModelRelease(model=target, reference=base), texts, labels


def tiny_language() -> tuple[LanguageModelRelease, Knowledge]:
    """The toy release and a knowledge of its unlabelled candidate pool (conformance)."""
    release, texts, _ = toy_language_release()
    return release, Knowledge(candidate_texts=texts)


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


def alternating_texts(lengths: tuple[int, ...]) -> list[str]:
    """One sentence per length, a common word (of three) at every other position and a word
    used nowhere else between them, so the common words stay candidates at most positions."""
    unique = iter(WORDS[3:])
    return [
        " ".join(WORDS[(k + b) % 3] if (k + b) % 2 == 0 else next(unique) for k in range(n))
        for b, n in enumerate(lengths)
    ]


@functools.cache
def search_setup(lengths: tuple[int, ...], n: int):  # type: ignore[no-untyped-def]
    """The tiny BERT's noiseless release of ``alternating_texts(lengths)`` cut to ``n``
    tokens, with what the encoder search starts from: the batch, the exact spans, the placed
    candidates per position without [SEP], and the lengths they allow."""
    batch, rel = client_release(tiny_bert(), alternating_texts(lengths), n)
    spans = build_spans(rel, batch=rel.batch_size, rank="tolerance", tol=None, exact=True)
    placed = placed_candidates(rel)
    if placed is None:
        raise AssertionError("the noiseless tiny BERT release must place its tokens")
    full = [sorted(p) for p in placed]
    inner = [[v for v in row if v != spans.end_id] for row in full]
    return batch, spans, inner, lengths_from(full, spans.end_id)
