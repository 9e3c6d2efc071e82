"""Scores of recovered token sequences against the originals: exact-sequence rate, token
accuracy, ROUGE-1/2 F1 (the ``rouge-score`` package on token ids), after a one-to-one matching
of recovered to original sequences (the batch order is not observable).

References:
    Lin, *ROUGE: A Package for Automatic Evaluation of Summaries*, ACL Workshop 2004.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from trainleak.errors import ConfigError, import_extra


@dataclass(frozen=True)
class TextScores:
    """Batch means over the originals, and the matched recovered sequence of each original."""

    exact_rate: float
    token_accuracy: float
    rouge1: float
    rouge2: float
    matched: tuple[tuple[int, ...], ...]


def _rouge(scorer: Any, pred: list[int], ref: list[int]) -> tuple[float, float]:
    s = scorer.score(" ".join(f"t{t}" for t in ref), " ".join(f"t{t}" for t in pred))
    return s["rouge1"].fmeasure, s["rouge2"].fmeasure


def _accuracy(pred: list[int], ref: list[int]) -> float:
    return sum(int(a == b) for a, b in zip(pred, ref, strict=False)) / max(len(ref), 1)


def score_sequences(recovered: list[list[int]], originals: list[list[int]]) -> TextScores:
    """Match recovered to original sequences (Hungarian on ROUGE-1 + token accuracy), then
    average each score over the originals (an unmatched original scores 0).

    Raises:
        ConfigError: no originals.
    """
    if not originals:
        raise ConfigError("score_sequences needs at least one original sequence")
    recovered = [r for r in recovered if r] or [[]]
    rouge_scorer = import_extra("rouge_score.rouge_scorer", "text", "ROUGE scores")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2"], use_stemmer=False)
    r1 = np.zeros((len(originals), len(recovered)))
    r2 = np.zeros_like(r1)
    acc = np.zeros_like(r1)
    for i, ref in enumerate(originals):
        for j, pred in enumerate(recovered):
            r1[i, j], r2[i, j] = _rouge(scorer, pred, ref) if pred else (0.0, 0.0)
            acc[i, j] = _accuracy(pred, ref)
    rows, cols = linear_sum_assignment(-(r1 + acc))
    exact = sum(recovered[j] == originals[i] for i, j in zip(rows, cols, strict=True))
    m = len(originals)
    matched: list[tuple[int, ...]] = [()] * m
    for i, j in zip(rows, cols, strict=True):
        matched[i] = tuple(recovered[j])
    return TextScores(
        exact / m,
        float(acc[rows, cols].sum() / m),
        float(r1[rows, cols].sum() / m),
        float(r2[rows, cols].sum() / m),
        tuple(matched),
    )
