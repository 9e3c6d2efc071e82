"""The reconstruction reward of ADRA (Yin, Morris, Shmatikov, Min and Hajishirzi, "Learning to
Detect Language Model Training Data via Active Reconstruction", arXiv 2602.19020, 2026).

r(y, s) = |U(y) ∩ U(s)| / |U(s)|, with U the set of unique word n-grams for n in a range (the
paper: 3..30; short texts: 2..6), words lower-cased, split on whitespace, punctuation stripped;
multiplied by a length penalty when len(y) / len(s) leaves [1/tol, tol]: the smaller of the
ratio and its inverse. The contrastive rewards take the maximum over the own suffix and K
distractor suffixes (ADRA), or mix the two maxima with a prior weight p (ADRA+).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

from trainleak.errors import ConfigError

_STRIP = str.maketrans("", "", string.punctuation)


def words(text: str) -> list[str]:
    """Lower-cased whitespace words with punctuation removed (empty ones dropped)."""
    out = (w.translate(_STRIP) for w in text.lower().split())
    return [w for w in out if w]


def ngrams(tokens: Sequence[str], n_min: int, n_max: int) -> set[tuple[str, ...]]:
    """The unique n-grams of ``tokens`` for every n in ``[n_min, n_max]``."""
    found: set[tuple[str, ...]] = set()
    for n in range(n_min, min(n_max, len(tokens)) + 1):
        found.update(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return found


def length_penalty(n_generated: int, n_reference: int, tol: float) -> float:
    """1 when ``n_generated / n_reference`` lies in ``[1/tol, tol]``; otherwise the smaller of
    the ratio and its inverse (0 for an empty generation)."""
    if n_reference == 0 or n_generated == 0:
        return 0.0
    ratio = n_generated / n_reference
    if 1 / tol <= ratio <= tol:
        return 1.0
    return min(ratio, 1 / ratio)


def coverage(
    generated: str, reference: str, ngram: tuple[int, int] = (2, 6), len_tol: float = 1.5
) -> float:
    """Unique word n-gram coverage of ``reference`` by ``generated``, times the length penalty.

    A reference shorter than the smallest n falls back to unigram coverage.

    Example:
        >>> coverage("the cat sat on the mat", "the cat sat on a mat", (2, 2))
        0.6
    """
    n_min, n_max = ngram
    if not 1 <= n_min <= n_max:
        raise ConfigError.invalid("ngram", "(n_min, n_max) with 1 <= n_min <= n_max", ngram)
    if len_tol < 1:
        raise ConfigError.invalid("len_tol", "a number >= 1", len_tol)
    gen, ref = words(generated), words(reference)
    lo = n_min if len(ref) >= n_min else 1
    target = ngrams(ref, lo, n_max)
    if not target:
        return 0.0
    hit = len(target & ngrams(gen, lo, n_max)) / len(target)
    return hit * length_penalty(len(gen), len(ref), len_tol)


def contrastive_reward(
    generated: str,
    own: str,
    distractors: Sequence[str],
    prior: float | None = None,
    ngram: tuple[int, int] = (2, 6),
    len_tol: float = 1.5,
) -> float:
    """ADRA's reward against the own suffix and distractor suffixes.

    Without ``prior`` (ADRA): the best coverage over own and distractors. With ``prior`` p in
    [0, 1] (ADRA+): ``p * max(all) + (1 - p) * max(distractors)``, so a prompt that looks like a
    non-member (small p) is rewarded mainly for reproducing other candidates.
    """
    own_r = coverage(generated, own, ngram, len_tol)
    dis = max((coverage(generated, d, ngram, len_tol) for d in distractors), default=0.0)
    best = max(own_r, dis)
    if prior is None:
        return best
    if not 0.0 <= prior <= 1.0:
        raise ConfigError.invalid("prior", "a number in [0, 1]", prior)
    return prior * best + (1.0 - prior) * dis


def split_prompt(text: str, prefix_ratio: float) -> tuple[str, str]:
    """Split a candidate at word level: the first ``prefix_ratio`` of its whitespace words are
    the prompt, the rest the reference suffix (at least one word each)."""
    if not 0 < prefix_ratio < 1:
        raise ConfigError.invalid("prefix_ratio", "a number in (0, 1)", prefix_ratio)
    parts = text.split()
    if len(parts) < 2:
        raise ConfigError(f"a candidate needs at least two words to split: {text!r}")
    cut = min(max(1, round(len(parts) * prefix_ratio)), len(parts) - 1)
    return " ".join(parts[:cut]), " ".join(parts[cut:])
