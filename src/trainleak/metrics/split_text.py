"""Scores for text reconstructed from a split language model's transcript (ground truth in).

``token_recovery``: the share of original (non-decoy, non-pad) positions whose token is
recovered at its position. ``slot_recovery``: the same over private-slot positions only.
``rouge_l``: ROUGE-L F1 (Lin 2004) between the tokens recovered at all sent positions and the
original sequence (so an attacker is not told where decoys sit). ``positional_prior``: the
most frequent public token at each position, the equal-budget baseline (one guess a position).
"""

from __future__ import annotations

import torch

from trainleak.errors import ShapeError


def _check(pred: torch.Tensor, truth: torch.Tensor, mask: torch.Tensor) -> None:
    if not (pred.shape == truth.shape == mask.shape and pred.ndim == 2):
        raise ShapeError(
            f"pred {tuple(pred.shape)}, truth {tuple(truth.shape)} and mask "
            f"{tuple(mask.shape)} must be the same (n, L) shape"
        )


def token_recovery(pred: torch.Tensor, truth: torch.Tensor, positions: torch.Tensor) -> float:
    """Share of ``positions`` (a boolean ``(n, L)`` mask) where ``pred`` equals ``truth``."""
    _check(pred, truth, positions)
    keep = positions.bool()
    if not bool(keep.any()):
        return float("nan")
    return float((pred[keep] == truth[keep]).float().mean())


def _lcs(a: list[int], b: list[int]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(
    pred: torch.Tensor, truth: torch.Tensor, sent: torch.Tensor, real: torch.Tensor
) -> float:
    """Mean ROUGE-L F1 between ``pred`` at the ``sent`` positions and ``truth`` at the
    ``real`` positions, row by row."""
    _check(pred, truth, sent)
    _check(pred, truth, real)
    scores = []
    for p, t, s, r in zip(pred, truth, sent.bool(), real.bool(), strict=True):
        a, b = p[s].tolist(), t[r].tolist()
        if not a or not b:
            continue
        lcs = _lcs(a, b)
        prec, rec = lcs / len(a), lcs / len(b)
        scores.append(0.0 if lcs == 0 else 2 * prec * rec / (prec + rec))
    return float(sum(scores) / len(scores)) if scores else float("nan")


def positional_prior(
    public_ids: torch.Tensor, length: int, skip: int | None = None
) -> torch.Tensor:
    """``(length,)`` the most frequent public token at each position (``skip``: an id never
    guessed, e.g. the pad token; positions beyond the public length take the overall mode)."""
    ids = public_ids[:, :length]
    flat = ids.flatten()
    if skip is not None:
        flat = flat[flat != skip]
    overall = int(torch.mode(flat).values) if flat.numel() else 0
    guess = torch.full((length,), overall, dtype=torch.long)
    for j in range(ids.shape[1]):
        col = ids[:, j]
        if skip is not None:
            col = col[col != skip]
        if col.numel():
            guess[j] = int(torch.mode(col).values)
    return guess
