"""Membership-inference scores: ROC curve, AUROC and the true-positive rate at a fixed low
false-positive rate (the metric that matters for membership: confident hits, not averages).

Scores are "higher means member". TPR at FPR ``f`` is read at the strictest threshold whose
false-positive rate does not exceed ``f``; with ``m`` non-members the smallest non-zero FPR is
``1 / m``, so at ``f < 1 / m`` it is the share of members scored above every non-member.

References:
    Carlini, Chien, Nasr, Song, Terzis and Tramer, "Membership Inference Attacks From First
    Principles", IEEE S&P 2022 (TPR at low FPR as the headline metric).

Example:
    >>> import torch
    >>> s = torch.tensor([0.9, 0.8, 0.3, 0.1])
    >>> m = torch.tensor([True, True, False, False])
    >>> auroc(s, m), tpr_at_fpr(s, m, 0.01)
    (1.0, 1.0)
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import roc_auc_score, roc_curve

from trainleak.errors import ConfigError, ShapeError
from trainleak.validation import check_in_range


def _arrays(scores: torch.Tensor, is_member: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores.detach().double().cpu()).reshape(-1)
    m = np.asarray(is_member.detach().cpu()).reshape(-1).astype(bool)
    if s.shape != m.shape:
        raise ShapeError(f"{s.size} scores for {m.size} membership labels")
    if not m.any() or m.all():
        raise ConfigError.invalid("is_member", "both members and non-members", int(m.sum()))
    if not np.all(np.isfinite(s)):
        raise ConfigError.invalid("scores", "finite values", "NaN or inf")
    return s, m


def auroc(scores: torch.Tensor, is_member: torch.Tensor) -> float:
    """Area under the ROC curve of ``scores`` (higher = member) against ``is_member``."""
    s, m = _arrays(scores, is_member)
    return float(roc_auc_score(m, s))


def membership_roc(scores: torch.Tensor, is_member: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The ROC curve: false-positive rates and true-positive rates (both ascending)."""
    s, m = _arrays(scores, is_member)
    fpr, tpr, _ = roc_curve(m, s)
    return fpr, tpr


def tpr_at_fpr(scores: torch.Tensor, is_member: torch.Tensor, fpr: float) -> float:
    """The largest TPR over thresholds whose FPR is at most ``fpr``."""
    check_in_range("fpr", fpr, 0.0, 1.0)
    f, t = membership_roc(scores, is_member)
    ok = f <= fpr + 1e-12
    return float(t[ok].max()) if ok.any() else 0.0
