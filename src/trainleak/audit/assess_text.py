"""Scoring language-model membership attacks against the user's training texts.

A membership attack on an open-weight language model (loss, zlib, reference ratio, Min-K%,
Min-K%++, ADRA; seed 14) gives each candidate text a score, higher for "member". With the
reference set (the texts the model was trained on, never shown to an attack), each candidate is
a member or not, and the finding counts the members identified at a false-positive rate of at
most 1 %: those scoring above the ``(j + 1)``-th highest non-member, ``j = floor(0.01 N)`` of
the ``N`` non-member candidates (Carlini et al., IEEE S&P 2022: TPR at low FPR). The baseline
is the 95 % quantile of what a score blind to membership identifies by the same rule: under a
random order of the ``M + N`` candidates, at least ``k`` members pass exactly when the top
``j + k`` hold at most ``j`` non-members, a hypergeometric probability, so the law is exact
(its mean is ``(j + 1) M / (N + 1)``, :func:`trainleak.experiments._lm_risk.chance_members`).
A quantile, not the mean: with few candidates a blind score often beats its mean (8 members
and 8 non-members: 2 or more pass with probability 0.23), and an assessment runs several
attacks. Without non-members (or without members) among the candidates nothing can be scored:
the candidates must mix texts the model saw with texts it did not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from scipy.stats import hypergeom

from trainleak.attacks import Reconstruction
from trainleak.audit.assess_scoring import Scored
from trainleak.experiments._lm_risk import FPR, chance_members
from trainleak.experiments.risk import scored_finding
from trainleak.releases.knowledge_file import read_texts


@dataclass(frozen=True)
class TextReference:
    """The texts a language model was trained on: scored against, never shown to an attack."""

    texts: tuple[str, ...]


def load_text_reference(path: str | Path) -> TextReference:
    """The training texts, one a line, from a UTF-8 text file."""
    return TextReference(read_texts(Path(path), "the reference set: training texts, one a line"))


def members_identified(scores: torch.Tensor, member: torch.Tensor, fpr: float = FPR) -> int:
    """Members scoring above the ``(floor(fpr N) + 1)``-th highest of the ``N`` non-members."""
    non = torch.sort(scores[~member], descending=True).values
    allowed = math.floor(fpr * len(non) + 1e-9)
    threshold = non[allowed] if allowed < len(non) else -math.inf
    return int((scores[member] > threshold).sum())


def chance_quantile(members: int, nonmembers: int, fpr: float = FPR, q: float = 0.95) -> int:
    """The smallest ``k`` with P(a membership-blind score identifies more than ``k``
    members) <= ``1 - q``, by the rule of :func:`members_identified`."""
    allowed = math.floor(fpr * nonmembers + 1e-9)
    total = members + nonmembers
    for k in range(members + 1):
        # P(K >= k + 1): the top allowed + k + 1 candidates hold at most `allowed` non-members
        draws = allowed + k + 1
        tail = float(hypergeom.cdf(allowed, total, nonmembers, draws)) if draws <= total else 0.0
        if tail <= 1 - q:
            return k
    return members


def auroc(scores: torch.Tensor, member: torch.Tensor) -> float:
    """P(a member scores above a non-member), ties counted half (Mann-Whitney)."""
    pos, neg = scores[member].double(), scores[~member].double()
    above = (pos[:, None] > neg[None, :]).double() + 0.5 * (pos[:, None] == neg[None, :]).double()
    return float(above.mean())


def score_membership(
    name: str,
    rec: Reconstruction,
    candidates: Sequence[str],
    ref: TextReference,
    own: Scored,
) -> Scored:
    """The finding of one membership attack (see the module docstring); ``own`` is the
    finding from the attack's output alone, returned with a reason when nothing can be scored."""
    known = set(ref.texts)
    member = torch.tensor([t in known for t in candidates], dtype=torch.bool)
    m, n = int(member.sum()), int((~member).sum())
    scores = rec.scores
    if scores is None or len(scores) != len(candidates):
        own.metrics["not scored"] = "the attack gave no score per candidate text"
        return own
    if m == 0 or n == 0:
        own.metrics["not scored"] = (
            f"the candidates hold {m} of the training texts and {n} other texts; both are needed"
        )
        return own
    scores = scores.detach().double()
    found = members_identified(scores, member)
    chance = chance_members(m, n)
    quantile = chance_quantile(m, n)
    area = auroc(scores, member)
    detail = own.finding.detail
    cut = int(rec.diagnostics.get("truncated") or 0)
    if cut:
        width = rec.diagnostics["max_length"]
        note = (
            f"{cut} of {len(candidates)} candidate texts are longer than {width} tokens and "
            f"were scored on their first {width} only (raise it with --set "
            f"{name}.max_length=N, up to the model's context)"
        )
        detail = f"{detail}; {note}" if detail else note
    finding = scored_finding(
        name,
        found,
        m,
        rule=(
            f"training texts identified at FPR <= {FPR:.0%} among {m + n} candidates "
            f"({n} not trained on); the baseline is the 95% quantile of what a score blind to "
            f"membership identifies; AUROC {area:.3f}"
        ),
        baseline=quantile,
        candidates=len(candidates),
        detail=detail,
        unit="training texts",
        baseline_kind="chance (its 95% quantile, as the rule says)",
    )
    metrics = {
        **own.metrics,
        "members among the candidates": m,
        "non-members among the candidates": n,
        "members identified at FPR <= 1%": found,
        "candidate texts cut to max_length": cut,
        "auroc": area,
        "chance expectation": chance,
        "chance, 95% quantile": quantile,
    }
    return Scored(finding, metrics)
