"""Key-span repairs of the growing search (:mod:`._assign`): a failed growth's near miss
(:func:`rescue`) and the last sequence of the batch (:func:`complete`), both by the pair-move
repair of :func:`._keyspan.fix` followed by the span check."""

from __future__ import annotations

from trainleak.attacks.transformer._keyspan import fix
from trainleak.attacks.transformer._state import Assignment


def rescue(state: Assignment, attempts: list[list[int]]) -> tuple[list[int], float, float] | None:
    """The first of the best ``state.rescue`` attempts (lowest ``J`` per position first) that
    the key-span repair (:func:`._keyspan.fix`, anchored on the pinned token, else on up to
    two placed tokens the attempt holds) makes exact and that then passes the span check;
    ``None`` when none does or the model has no key-span test. A failed growth's best attempt
    can sit in a local minimum of ``J`` that no single change leaves (MiniLM, n = 32: the long
    sequences end 2+ tokens wrong); the key-span residual of a placed token is exact for its
    own sequence and scores every pair of changes in closed form (from the true sequences
    with 2, 5 or 10 of their tokens replaced: 8/8, 8/8 and 7/8 repaired, docs/decisions.md)."""
    keys = state.spans.keys
    if keys is None:
        return None
    sites = set(state.sites())
    for seq in attempts[: state.rescue]:
        held = [(t, v) for t, v in enumerate(seq[:-1]) if (t, v) in sites]
        anchors = (
            [state.pin]
            if state.pin is not None
            else list(dict.fromkeys(held[len(held) // 2 :][:1] + held[:1]))
        )
        for anchor in anchors:
            fixed, residual = fix(keys, seq, [anchor], state.cands, state.rescue_rounds)
            if residual > 1e-12 or fixed == seq:
                continue
            j, worst = state.score([fixed])[0]
            if worst < state.accept:
                return fixed, j, worst
    return None


def complete(state: Assignment, start: list[int]) -> tuple[list[int], float, float] | None:
    """The last sequence, once the others are accepted and the token count fixes its length:
    every site (:meth:`Assignment.sites`) no accepted sequence holds is one of its tokens, so
    they are pinned and the key-span repair (:func:`._keyspan.fix`, anchored on all of them)
    fills the other positions from ``start``; returned when it passes the span check (tried
    once; ``None`` otherwise). Growths reach the last sequence, if long, as a near miss
    (MiniLM, n = 32: the 32-token sequences of seeds 0 and 2, docs/decisions.md), while its
    own tokens pin most of its positions and constrain the rest."""
    keys, lengths = state.spans.keys, state.open_lengths()
    if keys is None or state.completed or state.slots is None:
        return None
    if state.slots - len(state.accepted) != 1:
        return None
    if state.total is None or len(lengths) != 1:
        return None
    state.completed = True
    length = lengths[0]
    held = {(t, v) for s, _ in state.accepted for t, v in enumerate(s)}
    mine = [(t, v) for t, v in state.sites() if (t, v) not in held and t < length - 1]
    where = [t for t, _ in mine]
    mine = [(t, v) for t, v in mine if where.count(t) == 1]
    if not mine:
        return None
    cands = list(state.cands)
    body = state.close(start, length)
    for t, v in mine:
        cands[t], body[t] = [v], v
    # a round changes up to two positions but may revise earlier changes (MiniLM seed 3,
    # n = 32: 8 free positions, the last sequence missed at 6 rounds from 1 of 4 starts)
    rounds = sum(len(c) >= 2 for c in cands[: length - 1]) + 2
    seq, residual = fix(keys, body, mine, cands, rounds)
    if residual > 1e-12:
        return None
    j, worst = state.score([seq])[0]
    return (seq, j, worst) if worst < state.accept else None
