"""Tokenisation: a small word-level tokenizer trained offline, and encoding with clear errors.

``train_word_tokenizer`` trains a ``tokenizers`` WordLevel (or BPE) model on given texts, so the
fast tests and the default experiments need no model package. ``encode`` turns texts into a
padded id matrix and attention mask, prepends the BOS token for causal models (so the first word
is scored too), refuses empty texts and reports how many texts were truncated.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from tokenizers import decoders as tk_decoders
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from trainleak.errors import ConfigError
from trainleak.models.language.core import LanguageModel

SPECIAL = {"pad": "<pad>", "unk": "<unk>", "bos": "<bos>", "eos": "<eos>"}


def train_word_tokenizer(
    texts: Sequence[str],
    vocab_size: int,
    seed: int = 0,
    *,
    model: Literal["wordlevel", "bpe"] = "wordlevel",
) -> PreTrainedTokenizerFast:
    """Train a small tokenizer on ``texts`` (lower-cased; words and punctuation split).

    Args:
        texts: training texts (at least one non-empty).
        vocab_size: the vocabulary size, special tokens included (at least 8).
        seed: fixes the order the texts are fed in (training is otherwise deterministic).
        model: ``"wordlevel"`` (one token per word, ``<unk>`` beyond the vocabulary) or ``"bpe"``.

    Returns:
        a fast tokenizer with ``<pad>``, ``<unk>``, ``<bos>`` and ``<eos>`` set.
    """
    if vocab_size < 8:
        raise ConfigError.invalid("vocab_size", "an integer >= 8", vocab_size)
    clean = [t for t in texts if t.strip()]
    if not clean:
        raise ConfigError("train_word_tokenizer needs at least one non-empty text")
    if model not in ("wordlevel", "bpe"):
        raise ConfigError.invalid("model", "'wordlevel' or 'bpe'", model)
    random.Random(seed).shuffle(clean)
    specials = list(SPECIAL.values())
    tok: Tokenizer
    if model == "wordlevel":
        tok = Tokenizer(models.WordLevel(unk_token=SPECIAL["unk"]))
        trainer: trainers.Trainer = trainers.WordLevelTrainer(
            vocab_size=vocab_size, special_tokens=specials
        )
        tok.decoder = tk_decoders.WordPiece(prefix="##", cleanup=False)
    else:
        tok = Tokenizer(models.BPE(unk_token=SPECIAL["unk"]))
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=specials, show_progress=False
        )
        tok.decoder = tk_decoders.BPEDecoder()
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tok.train_from_iterator(clean, trainer=trainer)
    return wrap_tokenizer(tok)


def wrap_tokenizer(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """A transformers fast tokenizer around a ``tokenizers`` one with this module's specials."""
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=SPECIAL["pad"],
        unk_token=SPECIAL["unk"],
        bos_token=SPECIAL["bos"],
        eos_token=SPECIAL["eos"],
    )
    fast.padding_side = "right"
    return fast


@dataclass(frozen=True)
class Encoded:
    """Texts as token ids.

    Attributes:
        input_ids: ``(n, length)`` ids, right-padded with the pad id.
        attention_mask: ``(n, length)``, 1 on real tokens.
        truncated: how many texts were cut to ``max_length``.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    truncated: int


def encode(
    lm: LanguageModel, texts: Sequence[str], max_length: int, truncate: bool = True
) -> Encoded:
    """Tokenise ``texts`` for ``lm``: BOS first for causal models (the encoder's own special
    tokens for encoders), right padding, at most ``max_length`` tokens each.

    Raises:
        ConfigError: an empty list, an empty or whitespace-only text (its index is named),
            ``max_length`` below 2 or beyond the model's context, or, with ``truncate=False``,
            a text longer than ``max_length``.
    """
    if isinstance(texts, str) or not texts:
        raise ConfigError.invalid("texts", "a non-empty list of strings", texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise ConfigError(f"text {i} is empty or whitespace-only: {t!r}")
    if not 2 <= max_length <= lm.spec.max_length:
        raise ConfigError.invalid(
            "max_length", f"an integer in [2, {lm.spec.max_length}]", max_length
        )
    tok = lm.tokenizer
    causal = lm.kind == "causal"
    raw = tok(list(texts), add_special_tokens=not causal)["input_ids"]
    bos = _bos_id(tok) if causal else None
    seqs = [([bos] if bos is not None else []) + list(ids) for ids in raw]
    too_long = [i for i, s in enumerate(seqs) if len(s) > max_length]
    if too_long and not truncate:
        raise ConfigError(
            f"{len(too_long)} text(s) are longer than max_length={max_length} tokens (first: "
            f"text {too_long[0]}, {len(seqs[too_long[0]])} tokens); pass truncate=True to cut them"
        )
    seqs = [s[:max_length] for s in seqs]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), int(tok.pad_token_id), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return Encoded(ids, mask, len(too_long))


def _bos_id(tok: PreTrainedTokenizerBase) -> int | None:
    for cand in (tok.bos_token_id, tok.eos_token_id):
        if cand is not None:
            return int(cand)
    return None


def decode(lm: LanguageModel, ids: torch.Tensor | Sequence[int]) -> str:
    """Text of ``ids`` without special tokens."""
    seq = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    return str(lm.tokenizer.decode(seq, skip_special_tokens=True))
