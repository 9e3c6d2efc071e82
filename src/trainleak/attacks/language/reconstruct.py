"""Reconstruction scoring shared by n-sampling and ADRA: split each candidate into a prompt and a
reference suffix, sample continuations, and score them by coverage of the suffix (best and mean
over samples; higher means member)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainleak.attacks.language.reward import coverage, split_prompt
from trainleak.errors import ConfigError
from trainleak.models.language import LanguageModel, encode, generate


@dataclass(frozen=True)
class Sampling:
    """How continuations are drawn for scoring."""

    n_samples: int = 8
    max_new_tokens: int = 24
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 50
    batch_size: int = 128


@dataclass(frozen=True)
class Prompts:
    """Candidates split for reconstruction.

    Attributes:
        ids: one 1-D prompt id tensor per candidate (BOS first, no padding).
        suffixes: the reference suffix text of each candidate.
        truncated: prompts cut to ``max_length`` tokens.
    """

    ids: list[torch.Tensor]
    suffixes: list[str]
    truncated: int = 0


def make_prompts(
    lm: LanguageModel, texts: Sequence[str], prefix_ratio: float, max_length: int
) -> Prompts:
    """Split every candidate at ``prefix_ratio`` of its words and tokenise the prefixes."""
    if not texts:
        raise ConfigError("reconstruction needs at least one candidate text")
    pairs = [split_prompt(t, prefix_ratio) for t in texts]
    enc = encode(lm, [p for p, _ in pairs], max_length)
    lengths = enc.attention_mask.sum(1)
    ids = [enc.input_ids[i, : int(lengths[i])] for i in range(len(pairs))]
    return Prompts(ids, [s for _, s in pairs], enc.truncated)


@dataclass(frozen=True)
class ReconstructionScores:
    """Per-candidate similarity of sampled continuations to the true suffix.

    Attributes:
        best: best coverage over the samples.
        mean: mean coverage over the samples.
        best_text: the best continuation of each candidate.
    """

    best: torch.Tensor
    mean: torch.Tensor
    best_text: list[str]


def reconstruction_scores(
    lm: LanguageModel,
    prompts: Prompts,
    sampling: Sampling,
    ngram: tuple[int, int],
    len_tol: float,
    generator: torch.Generator,
) -> ReconstructionScores:
    """Sample ``sampling.n_samples`` continuations per prompt and score them against the
    suffixes with :func:`~trainleak.attacks.language.reward.coverage`."""
    gen = generate(
        lm,
        prompts.ids,
        sampling.max_new_tokens,
        sampling.temperature,
        sampling.top_p,
        sampling.top_k,
        sampling.n_samples,
        generator,
        batch_size=sampling.batch_size,
    )
    texts = gen.texts(lm)
    cov = torch.tensor(
        [[coverage(t, s, ngram, len_tol) for t in row] for row, s in zip(texts, prompts.suffixes)]
    )
    best_idx = cov.argmax(1)
    return ReconstructionScores(
        cov.max(1).values, cov.mean(1), [row[int(j)] for row, j in zip(texts, best_idx)]
    )
