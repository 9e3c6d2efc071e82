"""Bootstrap confidence intervals for AUROC and for the difference of two AUROCs on the same
candidates (paired: both scores are resampled with the same candidates), stratified so every
resample keeps the numbers of members and non-members (Efron and Tibshirani 1993; the paired
form as in DeLong-style comparisons of correlated ROC curves)."""

from __future__ import annotations

import numpy as np
import torch
from scipy.stats import rankdata

from trainleak.errors import ConfigError, ShapeError
from trainleak.validation import check_in_range


def _rank_auc(s: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """AUROC of each row of index arrays (Mann-Whitney U from average ranks; ties count 1/2)."""
    both = np.concatenate([s[pos], s[neg]], axis=1)
    ranks = rankdata(both, axis=1)
    n_p, n_n = pos.shape[1], neg.shape[1]
    u = ranks[:, :n_p].sum(axis=1) - n_p * (n_p + 1) / 2
    return np.asarray(u / (n_p * n_n), dtype=float)


def _resamples(is_member: torch.Tensor, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(is_member.detach().cpu()).reshape(-1).astype(bool)
    if not m.any() or m.all():
        raise ConfigError.invalid("is_member", "both members and non-members", int(m.sum()))
    if n_boot < 10:
        raise ConfigError.invalid("n_boot", "an integer >= 10", n_boot)
    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(m), np.flatnonzero(~m)
    return (rng.choice(pos, size=(n_boot, pos.size)), rng.choice(neg, size=(n_boot, neg.size)))


def _scores(scores: torch.Tensor, n: int) -> np.ndarray:
    s = np.asarray(scores.detach().double().cpu()).reshape(-1)
    if s.size != n:
        raise ShapeError(f"{s.size} scores for {n} membership labels")
    if not np.all(np.isfinite(s)):
        raise ConfigError.invalid("scores", "finite values", "NaN or inf")
    return s


def auroc_interval(
    scores: torch.Tensor,
    is_member: torch.Tensor,
    level: float = 0.95,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """Two-sided percentile bootstrap interval of the AUROC of ``scores``."""
    check_in_range("level", level, 0.0, 1.0, closed="()")
    pos, neg = _resamples(is_member, n_boot, seed)
    aucs = _rank_auc(_scores(scores, is_member.numel()), pos, neg)
    lo, hi = np.quantile(aucs, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def auroc_difference_interval(
    scores_a: torch.Tensor,
    scores_b: torch.Tensor,
    is_member: torch.Tensor,
    level: float = 0.95,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """Paired two-sided bootstrap interval of AUROC(a) - AUROC(b) on the same candidates."""
    check_in_range("level", level, 0.0, 1.0, closed="()")
    pos, neg = _resamples(is_member, n_boot, seed)
    n = is_member.numel()
    diff = _rank_auc(_scores(scores_a, n), pos, neg) - _rank_auc(_scores(scores_b, n), pos, neg)
    lo, hi = np.quantile(diff, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
