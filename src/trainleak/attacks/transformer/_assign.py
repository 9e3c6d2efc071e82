"""Encoder batch search by restarts of coordinate descent on a log span distance, grown in
length and deflated by the sequences already found.

An encoder's later tokens change every earlier position's layer-2 input, so a left-to-right
beam scores prefixes in the wrong context (on all-MiniLM-L6-v2 the true prefixes fall out of a
64-wide beam by position 10, docs/decisions.md). This search instead works on whole
sequences: from a start, each sweep sets every position to the candidate token minimising

    J(s) = sum_t log(d1_t^2 + d2_t^2 + eps)

(``d_l``: the span distance of the layer-``l`` input at position ``t`` of ``s`` closed by the
end token), visiting the positions worst fit first. The logarithm rewards a position that fits
exactly far more than it penalises one that does not, so the sweep locks in the positions whose
context is already right instead of trading them for a smaller mean (with the squared distances
alone, descent from a sequence with 4 of 14 tokens wrong ended further from it).

Lengths. ``J`` cannot choose a length: its sum prefers a long near miss to a short exact fit
(on MiniLM at n = 32 every free-length descent ended at the longest length), its mean prefers
``[CLS] [SEP]``. But a descent at a fixed length ``l`` shorter than some sequence ends at that
sequence's first ``l - 1`` tokens closed early (its prefix fits all but the last positions).
So :func:`grow` descends at every candidate length in increasing order, each from the previous
descent's tokens, and stops at the first length where the sequence passes the span check.

Deflation. Every restart would grow into the same dominant sequence. Once a sequence is
accepted, its layer-2 inputs ``A`` are removed: the layer-2 distance is taken of the input's
component orthogonal to ``span(A)``, normalised, to the part of the layer-2 span orthogonal to
``A``. A remaining sequence's inputs lie in the span and are independent of ``A`` (distance 0
still); an accepted sequence, its prefixes and near copies leave only an error component
(distance ~1), so they stop attracting the descent.

Token count. Without noise the layer-2 gradient's rank is the number of tokens in the batch
(every position feeds its own input; ``Spans.tokens``). Once sequences are accepted the
remaining ones share what is left: a growth goes no longer than the remaining tokens less
two ([CLS] [SEP]) per other open slot (the last slot: the exact remainder; the shorter
lengths remain its path) and the search stops when every token is explained.

Restarts begin from coverage starts: at each position a candidate that no accepted sequence
uses there (the assignment of the tokens at each position to the ``B`` sequences, Petrov et
al., *DAGER*, NeurIPS 2024, for the span signal; the search is ours).
"""

from __future__ import annotations

import torch

from trainleak.attacks.transformer._keyfix import complete, rescue
from trainleak.attacks.transformer._state import Assignment


def _best_length(state: Assignment, body: list[int]) -> tuple[int, float, float]:
    lengths = state.open_lengths()
    scores = state.score([state.close(body, ell) for ell in lengths])
    i = min(range(len(lengths)), key=lambda k: scores[k][0])
    return lengths[i], scores[i][0], scores[i][1]


def _worst_first(state: Assignment, body: list[int], length: int) -> list[int]:
    """The free positions (two or more candidates) of the closed ``body``, worst fit first: a
    wrong token is repaired before its neighbours are changed to fit it."""
    d = state.distances([state.close(body, length)])[0]
    cost = (d**2).sum(0)
    free = [t for t in range(length - 1) if len(state.cands[t]) >= 2]
    return sorted(free, key=lambda t: -float(cost[t]))


def descend(
    state: Assignment, body: list[int], sweeps: int, length: int | None = None
) -> tuple[list[int], float, float]:
    """Coordinate descent of ``J`` from ``body`` (one token per position) at a fixed
    ``length`` (``None``: the best length by ``J`` after each sweep); returns the closed
    sequence, its ``J`` and its worst span distance. Stops as soon as the sequence passes."""
    body = list(body)
    free = length is None
    if length is None:
        length, best, worst = _best_length(state, body)
    else:
        best, worst = state.score([state.close(body, length)])[0]
    for _ in range(sweeps):
        before = best
        for t in _worst_first(state, body, length) if worst >= state.accept else []:
            trials = []
            for v in state.cands[t]:
                s = list(body)
                s[t] = v
                trials.append(state.close(s, length))
            scores = state.score(trials)
            i = min(range(len(trials)), key=lambda k: scores[k][0])
            body[t] = trials[i][t]
            best, worst = scores[i]
            if worst < state.accept:
                break
        if free and worst >= state.accept:
            length, best, worst = _best_length(state, body)
        if worst < state.accept or best >= before:
            break
    return state.close(body, length), best, worst


def grow(state: Assignment, body: list[int], sweeps: int) -> tuple[list[int], float, float]:
    """Descents at the candidate lengths in increasing order, each from the tokens the
    previous one ended with, until one passes (see the module docstring). A growth that
    reaches what earlier failed growths reached at ``state.retrace`` consecutive lengths
    (counting lengths with three or more free positions: all growths share the short ones)
    stops there: it is retracing a path whose best attempt was repaired then. Otherwise the
    attempt with the lowest ``J`` per position, the length where most positions fit, is
    repaired (:func:`repair`) and returned (MiniLM, WikiText-2 seed 0, n = 32: a growth
    along a 28-token sequence ends at ``J / l`` -12.2 at its length with 25 of 27 tokens
    right, -9.1 or above at every other length, docs/decisions.md)."""
    out: list[tuple[list[int], float, float]] = []
    hits = 0
    # the shorter candidate lengths are stepping stones (the last slot under the token count
    # is grown through them, seed 2 n 32: 0 of 9 straight at its length); where there are
    # none (a batch truncated to n: [SEP] only at n - 1) every shorter length is one
    top = max(state.open_lengths())
    path = [ell for ell in sorted(state.lengths) if ell <= top]
    for length in path if len(path) >= 2 else range(min(3, top), top + 1):
        seq, j, worst = descend(state, body, sweeps, length)
        body = seq[:-1] + body[length - 1 :]
        out.append((seq, j, worst))
        if worst < state.accept:
            return seq, j, worst
        past_pin = state.pin is None or length > state.pin[0] + 1
        if past_pin and sum(len(c) >= 2 for c in state.cands[: length - 1]) >= 3:
            hits = hits + 1 if tuple(seq) in state.visited else 0
        if hits >= state.retrace:
            break
    retraced = hits >= state.retrace
    if not out:
        return state.close(body, len(body)), 0.0, 1.0
    state.visited.update(tuple(s) for s, _, _ in out)
    # past the pinned token (shorter attempts do not hold it) and with a free position
    low = state.pin[0] + 2 if state.pin is not None else 3
    ranked = sorted(out, key=lambda a: (len(a[0]) < low, a[1] / len(a[0])))
    best = ranked[0] if retraced else repair(state, *ranked[0])
    if best[2] >= state.accept:
        best = rescue(state, [s for s, _, _ in ranked if len(s) >= low]) or best
    return best


def repair(
    state: Assignment, seq: list[int], j: float, worst: float
) -> tuple[list[int], float, float]:
    """Steepest descent at ``seq``'s length: each step makes the single best change over
    every free position and candidate, at most ``state.repair`` steps, stopping when the
    sequence passes or no change lowers ``J``. Coordinate sweeps visit the positions in turn
    and commit to the first improvement, which near the truth can be a compensating wrong
    token; the best single change is the wrong token's fix (MiniLM, n = 32, WikiText-2 seed
    0: from the true sequences with 1, 2 or 4 tokens replaced, 8 of 8 repaired at each,
    against 7 of 8 by the sweeps from one replaced token, docs/decisions.md)."""
    length = len(seq)
    for _ in range(state.repair if worst >= state.accept else 0):
        trials = []
        for t in range(length - 1):
            for v in state.cands[t] if len(state.cands[t]) >= 2 else []:
                if v != seq[t]:
                    trials.append(seq[:t] + [v] + seq[t + 1 :])
        if not trials:
            break
        scores = state.score(trials)
        i = min(range(len(trials)), key=lambda k: scores[k][0])
        if scores[i][0] >= j:
            break
        seq, (j, worst) = trials[i], scores[i]
        if worst < state.accept:
            break
    return seq, j, worst


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
    ``state.accept``: the given starts first, then coverage starts (growths anchored on the
    placed tokens in turn, :func:`_anchored`, while untried ones are left), ``restarts``
    attempts in all, stopping early once the accepted sequences hold every token
    (``state.total``); the batch is completed with the best rejected attempts (lowest
    ``J``)."""
    queue = list(starts)
    state.slots = batch
    for _ in range(restarts):
        if len(state.accepted) >= batch or state.explained():
            break
        anchor = state.next_anchor() if state.grow and not queue else None
        start = queue.pop(0) if queue else coverage_start(state, generator)
        last = None if queue else complete(state, start)
        if last is not None:
            seq, j, worst = last
        elif anchor is None:
            seq, j, worst = (grow if state.grow else descend)(state, start, sweeps)
        else:
            seq, j, worst = _anchored(state, start, anchor, sweeps)
        known = {tuple(s) for s, _ in state.accepted}
        if tuple(seq) in known:
            continue
        if worst < state.accept:
            state.take(seq, worst)
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


def _anchored(
    state: Assignment, start: list[int], anchor: tuple[int, int], sweeps: int
) -> tuple[list[int], float, float]:
    """A growth with ``anchor``'s token pinned at its position (the only candidate there).
    Unanchored growths from different starts mostly retrace one path (MiniLM, seed 0,
    n = 32: 2 distinct growths in 16 restarts): the short lengths' descents reach the same
    prefix whatever the start. A token the embedding gradient placed at one position belongs
    to exactly one sequence (or to several, each at that position), so growths anchored on
    different placed tokens head for different sequences."""
    t, v = anchor
    state.tried.add(anchor)
    row = state.cands[t]
    state.cands[t] = [v]
    state.pin = anchor
    try:
        return grow(state, start[:t] + [v] + start[t + 1 :], sweeps)
    finally:
        state.cands[t] = row
        state.pin = None


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
