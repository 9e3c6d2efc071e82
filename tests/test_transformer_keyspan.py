"""Issue 14, key-span test: a once-occurring token's first-block Q/K gradient coefficients lie
in the key/query span of its own sequence (exact in float64), and the pair-move repair built on
it recovers near misses that the steepest single-change repair of ``J`` cannot."""

from __future__ import annotations

import dataclasses
import random

import pytest

from language_fixtures import search_setup, tiny_release
from trainleak.attacks.transformer._assign import Assignment, repair
from trainleak.attacks.transformer._keyfix import complete, rescue
from trainleak.attacks.transformer._keyspan import fix
from trainleak.attacks.transformer._spans import build_spans

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _setup():  # type: ignore[no-untyped-def]
    """Four sentences of 4, 7, 10 and 13 words (``alternating_texts``), cut to 15 tokens."""
    batch, spans, inner, lengths = search_setup((4, 7, 10, 13), 15)
    return batch.sequences(), spans, inner, lengths


def _once(seqs: list[list[int]]) -> list[tuple[int, int, int]]:
    """``(sequence, position, token)`` of every token occurring once in the batch."""
    counts: dict[int, int] = {}
    for s in seqs:
        for v in s:
            counts[v] = counts.get(v, 0) + 1
    return [(b, t, v) for b, s in enumerate(seqs) for t, v in enumerate(s) if counts[v] == 1]


def test_key_span_holds_a_once_occurring_tokens_own_sequence_only() -> None:
    seqs, spans, _, _ = _setup()
    keys = spans.keys
    assert keys is not None
    once = _once(seqs)
    assert len(once) >= 12
    for b, _, v in once:
        own = keys.residual(seqs[b], [v])
        others = [keys.residual(s, [v]) for c, s in enumerate(seqs) if c != b]
        assert own < 1e-9, (b, v, own)
        assert min(others) > 1e-3, (b, v, others)
        # one wrong token anywhere else in the sequence breaks it too
    b, t, v = next(o for o in once if len(seqs[o[0]]) >= 10)
    for p in range(1, len(seqs[b]) - 1):
        if p != t:
            wrong = list(seqs[b])
            wrong[p] = seqs[(b + 1) % len(seqs)][min(p, len(seqs[(b + 1) % len(seqs)]) - 2)]
            if wrong[p] != seqs[b][p]:
                assert keys.residual(wrong, [v]) > 1e-6


def test_key_span_is_off_under_noise_and_on_decoders() -> None:
    for kind, noise in (("encoder", 1e-3), ("causal", 0.0)):
        _, rel = tiny_release(kind, noise=noise)
        spans = build_spans(rel, batch=3, rank="batch", tol=None, exact=False)
        assert spans.keys is None
    _, rel = tiny_release("encoder")
    assert build_spans(rel, batch=3, rank="tolerance", tol=None, exact=True).keys is not None


def test_pair_repair_recovers_what_the_single_change_repair_cannot() -> None:
    """18 fixed corruptions (6 tokens replaced by other candidates, or every free one) of the
    three longer sequences, each anchored on one of its once-occurring tokens: the key-span
    pair repair recovers all 18, the steepest single-change repair of ``J`` 11 (run alone;
    its count moves with the float path, as in the retrace test)."""
    seqs, spans, inner, lengths = _setup()
    rng = random.Random(0)
    keys = spans.keys
    assert keys is not None
    once = _once(seqs)
    paired = single = 0
    for b in (1, 2, 3):
        seq = seqs[b]
        anchor = next((t, v) for c, t, v in once if c == b and t >= 2)
        free = [t for t in range(1, len(seq) - 1) if len(inner[t]) >= 2 and t != anchor[0]]
        for _ in range(6):
            wrong = list(seq)
            for t in rng.sample(free, min(6, len(free))):
                wrong[t] = rng.choice([v for v in inner[t] if v != seq[t]])
            paired += fix(keys, wrong, [anchor], inner, rounds=6)[0] == seq
            state = Assignment(spans, inner, lengths, 1e-12, 1e-3)
            single += repair(state, wrong, *state.score([wrong])[0])[0] == seq
    assert paired >= 17, (paired, single)
    assert single <= 15, (paired, single)


def test_a_failed_attempt_is_rescued_by_the_key_span_repair() -> None:
    """A pinned growth's failed attempts (each longer sequence with three free tokens
    replaced) are returned exact by the rescue, after one span check each; without the
    key-span test (``keys`` removed) there is no rescue."""
    seqs, spans, inner, lengths = _setup()
    rng = random.Random(1)
    for b in (1, 2, 3):
        seq = seqs[b]
        anchor = next((t, v) for c, t, v in _once(seqs) if c == b and t >= 2)
        free = [t for t in range(1, len(seq) - 1) if len(inner[t]) >= 2 and t != anchor[0]]
        wrong = list(seq)
        for t in rng.sample(free, 3):
            wrong[t] = rng.choice([v for v in inner[t] if v != seq[t]])
        state = Assignment(spans, inner, lengths, 1e-12, 1e-3)
        state.pin = anchor
        got = rescue(state, [wrong])
        assert got is not None and got[0] == seq, b
        assert got[2] < 1e-8
        assert state.evaluated == 1
        plain = Assignment(dataclasses.replace(spans, keys=None), inner, lengths, 1e-12, 1e-3)
        plain.pin = anchor
        assert rescue(plain, [wrong]) is None


def test_the_last_sequence_is_completed_from_its_unheld_sites() -> None:
    """Three sequences accepted: the last one's length is the remaining token count and the
    placed tokens no accepted sequence holds are its own, so the key-span repair anchored on
    all of them completes it from a start of first candidates, for each of the four choices of
    the last sequence, with one span check each (a growth from the same start: hundreds)."""
    seqs, spans, inner, lengths = _setup()
    start = [r[0] if r else spans.end_id for r in inner]
    for last in range(4):
        state = Assignment(spans, inner, lengths, 1e-12, 1e-3, total=spans.tokens, slots=4)
        for b in range(4):
            if b != last:
                state.take(seqs[b], 0.0)
        got = complete(state, list(start))
        assert got is not None, last
        assert got[0] == seqs[last]
        assert got[2] < 1e-8
        assert state.evaluated == 1
        assert complete(state, list(start)) is None  # tried once
    state = Assignment(spans, inner, lengths, 1e-12, 1e-3, total=spans.tokens, slots=4)
    state.take(seqs[0], 0.0)
    assert complete(state, list(start)) is None  # more than one slot open
