"""Encoder batch search by restarts of coordinate descent on a log span distance.

An encoder's later tokens change every earlier position's layer-2 input, so a left-to-right
beam scores prefixes in the wrong context (on all-MiniLM-L6-v2 the true prefixes fall out of a
64-wide beam by position 10, docs/decisions.md). This search instead works on whole
sequences: from a start, each sweep sets every position to the candidate token minimising

    J(s) = sum_t log(d1_t^2 + d2_t^2 + eps)

(``d_l``: the span distance of the layer-``l`` input at position ``t`` of ``s`` closed by the
end token), visiting the positions worst fit first, then picks the best length. The
logarithm rewards a position that fits exactly far more than it penalises one that does not,
so the sweep locks in the positions whose context is already right instead of trading them
for a smaller mean (with the squared distances alone, descent from a sequence with 4 of 14
tokens wrong ended further from it).
Restarts begin from coverage starts: at each position a candidate that no accepted sequence
uses there, so each restart is drawn towards a sequence not yet found (the assignment of the
tokens at each position to the ``B`` sequences, Petrov et al., *DAGER*, NeurIPS 2024, for the
span signal; the search is ours).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from trainleak.attacks.transformer._spans import Spans


@dataclass
class Assignment:
    """Search state: candidates per position (end token excluded), the lengths whose last
    position may hold the end token, the accepted sequences and the rejected attempts."""

    spans: Spans
    cands: list[list[int]]
    lengths: list[int]
    eps: float
    accept: float
    accepted: list[tuple[list[int], float]] = field(default_factory=list)
    rejected: list[tuple[list[int], float, float]] = field(default_factory=list)
    evaluated: int = 0

    def score(self, seqs: list[list[int]]) -> list[tuple[float, float]]:
        """``(J, worst distance)`` of each closed sequence."""
        self.evaluated += len(seqs)
        out = []
        for d in self.spans.distances(seqs):
            sq = (d**2).sum(0)
            out.append((float(torch.log(sq + self.eps).sum()), float(d.max())))
        return out

    def close(self, body: list[int], length: int) -> list[int]:
        return body[: length - 1] + [self.spans.end_id]


def _best_length(state: Assignment, body: list[int]) -> tuple[int, float, float]:
    seqs = [state.close(body, ell) for ell in state.lengths]
    scores = state.score(seqs)
    i = min(range(len(seqs)), key=lambda k: scores[k][0])
    return state.lengths[i], scores[i][0], scores[i][1]


def _worst_first(state: Assignment, body: list[int], length: int) -> list[int]:
    """The free positions (two or more candidates) of the closed ``body``, worst fit first: a
    wrong token is repaired before its neighbours are changed to fit it."""
    d = state.spans.distances([state.close(body, length)])[0]
    state.evaluated += 1
    cost = (d**2).sum(0)
    free = [t for t in range(length - 1) if len(state.cands[t]) >= 2]
    return sorted(free, key=lambda t: -float(cost[t]))


def descend(state: Assignment, body: list[int], sweeps: int) -> tuple[list[int], float, float]:
    """Coordinate descent of ``J`` from ``body`` (one token per position); returns the closed
    sequence, its ``J`` and its worst span distance."""
    body = list(body)
    length, best, worst = _best_length(state, body)
    for _ in range(sweeps):
        before = best
        for t in _worst_first(state, body, length):
            trials = []
            for v in state.cands[t]:
                s = list(body)
                s[t] = v
                trials.append(state.close(s, length))
            scores = state.score(trials)
            i = min(range(len(trials)), key=lambda k: scores[k][0])
            body[t] = trials[i][t]
            best, worst = scores[i]
        length, best, worst = _best_length(state, body)
        if worst < state.accept or best >= before:
            break
    return state.close(body, length), best, worst


def coverage_start(state: Assignment, generator: torch.Generator) -> list[int]:
    """At each position a random candidate that no accepted sequence holds there (any
    candidate where all are used)."""
    out = []
    for t, row in enumerate(state.cands):
        used = {s[t] for s, _ in state.accepted if len(s) > t}
        pool = [v for v in row if v not in used] or row or [state.spans.end_id]
        out.append(pool[int(torch.randint(len(pool), (1,), generator=generator))])
    return out


def search(
    state: Assignment,
    batch: int,
    starts: list[list[int]],
    restarts: int,
    sweeps: int,
    generator: torch.Generator,
) -> list[tuple[list[int], float]]:
    """Accept up to ``batch`` distinct sequences whose worst span distance is below
    ``state.accept``: the given starts first, then coverage starts, ``restarts`` attempts in
    all; the batch is completed with the best rejected attempts (lowest ``J``)."""
    queue = list(starts)
    for _ in range(restarts):
        if len(state.accepted) >= batch:
            break
        start = queue.pop(0) if queue else coverage_start(state, generator)
        seq, j, worst = descend(state, start, sweeps)
        known = {tuple(s) for s, _ in state.accepted}
        if tuple(seq) in known:
            continue
        if worst < state.accept:
            state.accepted.append((seq, worst))
        else:
            state.rejected.append((seq, j, worst))
    out = list(state.accepted)
    seen = {tuple(s) for s, _ in out}
    for seq, _, worst in sorted(state.rejected, key=lambda r: r[1]):
        if len(out) >= batch:
            break
        if tuple(seq) not in seen:
            out.append((seq, worst))
            seen.add(tuple(seq))
    return out


def pad_body(body: list[int], cands: list[list[int]], end_id: int) -> list[int]:
    """A start of length ``len(cands)``: ``body``'s tokens, then each position's first
    candidate."""
    out = list(body[: len(cands)])
    for t in range(len(out), len(cands)):
        out.append(cands[t][0] if cands[t] else end_id)
    return out


def lengths_from(cands_with_end: list[list[int]], end_id: int) -> list[int]:
    """Lengths ``t + 1`` for every position ``t >= 1`` whose candidates hold the end token and
    whose earlier positions all have a candidate other than it."""
    out = []
    for t in range(1, len(cands_with_end)):
        if any(not [v for v in c if v != end_id] for c in cands_with_end[:t]):
            break
        if end_id in cands_with_end[t]:
            out.append(t + 1)
    return out
