"""Sentences from WikiText-2 for the language-model clients."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from trainleak.data.text import load_wikitext2
from trainleak.errors import ConfigError

_SPLIT = re.compile(r"(?<= [.!?]) ")


def wikitext_sentences(
    count: int,
    *,
    seed: int = 0,
    min_words: int = 4,
    max_words: int = 30,
    split: str = "test",
    data_dir: str | Path | None = None,
) -> list[str]:
    """``count`` distinct sentences of ``min_words``..``max_words`` words, sampled with ``seed``.

    Paragraphs are split after `` . ``, `` ! `` and `` ? `` (the corpus is pre-tokenised);
    sentences containing ``<unk>`` are skipped so the text round-trips through any tokenizer.

    Raises:
        ConfigError: fewer than ``count`` sentences qualify.
    """
    pool = sorted(
        {
            s.strip()
            for p in load_wikitext2(split, data_dir)  # type: ignore[arg-type]
            for s in _SPLIT.split(p)
            if "<unk>" not in s and min_words <= len(s.split()) <= max_words
        }
    )
    if len(pool) < count:
        raise ConfigError(f"only {len(pool)} WikiText-2 sentences qualify, {count} requested")
    order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))
    return [pool[int(i)] for i in order[:count]]
