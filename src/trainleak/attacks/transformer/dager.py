"""DAGER: exact gradient inversion of transformers by span tests.

Layer 1: every vocabulary token at every position is tested for membership of the row space of
the first Q/K/V gradient (distance below ``l1_threshold``); layer 2: candidate sequences built
from the surviving tokens are run through the first block and kept when every position's
input to the second block lies in that block's gradient row space (``l2_threshold``). Decoders
are searched greedily left to right (a causal prefix fixes its positions); encoders by
exhaustive enumeration per length, or, when the product of candidate counts exceeds
``max_combinations``, restarts of coordinate descent on a log span distance over whole
sequences (:mod:`._assign`; DAGER's own heuristic here is a prefix beam, which on a pretrained
encoder loses the true prefixes, docs/decisions.md). On BERT-style encoders with a noiseless
gradient the layer-1 candidates are first restricted to the tokens the embedding gradient
places at each position (:mod:`._localise`). A decoder's finished sequences are accepted by
the number of layer-2 directions they add (:mod:`._coverage`), not by length and distance.

References:
    Petrov, Dimitrov, Baader, Mueller, Vechev, *DAGER: Exact Gradient Inversion for Large
    Language Models*, NeurIPS 2024, Alg. 1-2 (defaults l1 1e-5, l2 1e-3).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.transformer._assign import Assignment, lengths_from, search
from trainleak.attacks.transformer._coverage import select
from trainleak.attacks.transformer._localise import placed_candidates
from trainleak.attacks.transformer._output import pack
from trainleak.attacks.transformer._spans import RankRule, Spans, build_spans
from trainleak.errors import ConfigError
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.transformer_update import TransformerUpdate
from trainleak.validation import param


@register_attack
@dataclass(frozen=True, kw_only=True)
class Dager(Attack[TransformerUpdate]):
    """The DAGER span-test search (see the module docstring).

    Args:
        l1_threshold: layer-1 span distance below which a token is a candidate.
        l2_threshold: largest layer-2 distance of an accepted sequence.
        rank: ``"tolerance"`` (singular values above ``tol``) or ``"batch"`` (top ``B * n``).
        tol: relative singular-value tolerance (``None``: dtype precision).
        max_combinations: largest encoder search enumerated exhaustively per length.
        beam_width: prefixes kept per step by the greedy decoder search.
        restarts: descents of the encoder search (0: ``6 B``).
        sweeps: coordinate sweeps per descent.
        eps: floor added to the squared distances inside the encoder search's logarithm.
        exact: refuse a batch with ``B * n`` not below the layer width.
        new_direction_tol: decoders: residual norm (of a unit layer-2 input, against the
            inputs of the sequences accepted before it) above which a position adds a
            direction; finished sequences are accepted by how many they add.
    """

    name: ClassVar[str] = "dager"
    summary: ClassVar[str] = "DAGER: layer-1/layer-2 span tests over tokens (Petrov 2024)"
    release_type: ClassVar[type[TransformerUpdate]] = TransformerUpdate

    l1_threshold: float = param(1e-5, gt=0, le=1)
    l2_threshold: float = param(1e-3, gt=0, le=1)
    rank: RankRule = param("tolerance", choices=RankRule)
    tol: float | None = param(None, gt=0, lt=1)
    max_combinations: int = param(20000, ge=1, integer=True)
    beam_width: int = param(256, ge=1, integer=True)
    restarts: int = param(0, ge=0, integer=True)
    sweeps: int = param(4, ge=1, integer=True)
    eps: float = param(1e-12, gt=0, lt=1)
    exact: bool = True
    new_direction_tol: float = param(1e-6, gt=0, lt=1)

    def run(
        self,
        release: TransformerUpdate,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        batch = release.batch_size or knowledge.n_records
        spans = build_spans(release, batch=batch, rank=self.rank, tol=self.tol, exact=self.exact)
        placed = placed_candidates(release)
        cands = [
            [
                v
                for v in torch.nonzero(spans.table[t] < self.l1_threshold).flatten().tolist()
                if placed is None or v in placed[t]
            ]
            for t in range(spans.positions)
        ]
        if not cands[0] and self.exact:
            raise ConfigError(
                "no vocabulary token lies in the layer-1 gradient span at position 0: the "
                "gradient was not computed at these weights or with this tokenizer (or is "
                "noised; raise l1_threshold or use rank='batch')"
            )
        if spans.causal:
            found, evaluated = _decoder_search(self, spans, cands)
        else:
            grow = placed is not None
            found, evaluated = _encoder_search(self, spans, cands, batch, generator, grow)
        if spans.causal:
            # by the directions each adds: a run of a first token passes every test on a
            # LLaMA-style decoder (see ._coverage); prefixes of an accepted one add none
            found = select(spans, found, batch, self.new_direction_tol)
        else:
            # longest first: an unextendable short sequence can have a smaller worst
            # distance than the full one
            found.sort(key=lambda item: (-len(item[0]), item[1]))
        seqs = [s for s, _ in found[: batch or len(found)]]
        out = pack(
            seqs,
            batch,
            release.max_length,
            spans.pad_id,
            candidates_per_position=tuple(len(c) for c in cands),
            sequences_evaluated=evaluated,
        )
        missing = [-1.0] * (len(out) - len(seqs))
        scores = torch.tensor([-d for _, d in found[: len(seqs)]] + missing)
        return Reconstruction(out.inputs, scores=scores, diagnostics=out.diagnostics)

    def expected_shape(
        self, release: TransformerUpdate, knowledge: Knowledge
    ) -> tuple[int, ...] | None:
        return (release.max_length,)


def _decoder_search(
    att: Dager, spans: Spans, cands: list[list[int]]
) -> tuple[list[tuple[list[int], float]], int]:
    """Greedy autoregressive search: extend each accepted prefix by every layer-1 candidate of
    the next position and keep the extensions whose new position passes both tests; a prefix
    that no candidate extends is finished, closed with the end token (whose position feeds no
    gradient)."""
    prefixes: list[tuple[list[int], float]] = [([], 0.0)]
    done: list[tuple[list[int], float]] = []
    evaluated = 0
    for t in range(spans.positions - 1):
        trials = [(p + [v], w) for p, w in prefixes for v in cands[t] if v != spans.end_id]
        dists = spans.distances([s + [spans.end_id] for s, _ in trials]) if trials else []
        evaluated += len(trials)
        kept: list[tuple[list[int], float]] = []
        for (s, w), d in zip(trials, dists, strict=True):
            worst = max(w, float(d[1, t]), float(d[0, t]))
            if worst < att.l2_threshold:
                kept.append((s, worst))
        extended = {tuple(s[:-1]) for s, _ in kept}
        done += [(p + [spans.end_id], w) for p, w in prefixes if p and tuple(p) not in extended]
        kept.sort(key=lambda item: item[1])
        prefixes = kept[: att.beam_width]
        if not prefixes:
            break
    done += [(p + [spans.end_id], w) for p, w in prefixes if p]
    return done, evaluated


def _encoder_search(
    att: Dager,
    spans: Spans,
    cands: list[list[int]],
    batch: int | None,
    generator: torch.Generator,
    grow: bool,
) -> tuple[list[tuple[list[int], float]], int]:
    """Per length ``l`` with the end token a candidate at ``l - 1``: all combinations of the
    candidates at positions ``0 .. l - 2`` when the product is at most ``max_combinations``;
    otherwise the restarted coordinate descent of :mod:`._assign`, grown through the lengths
    when the candidates come from the embedding gradient's placement (``grow``; a noiseless
    BERT-style gradient, where the batch's token count bounds the lengths and the slots no
    accepted sequence fills get the best near misses); under noise only accepted sequences
    are returned (the thresholds are the baseline's test)."""
    inner = [[v for v in c if v != spans.end_id] for c in cands]
    ends = [t for t in range(1, spans.positions) if spans.end_id in cands[t]]
    if not ends:
        return [], 0
    if math.prod(max(len(c), 1) for c in inner[: ends[-1]]) > att.max_combinations:
        lengths = lengths_from(cands, spans.end_id)
        if not lengths:
            return [], 0
        b = batch or spans.positions
        total = spans.tokens if grow else None
        state = Assignment(spans, inner, lengths, att.eps, att.l2_threshold, grow=grow, total=total)
        out = search(state, b, [], att.restarts or 6 * b, att.sweeps, generator)
        # noiseless: the span test is exact, so a miss is the search's, not the threshold's;
        # the slots it could not fill get its best near misses (lowest J), as TIGER's do
        return (out if grow else list(state.accepted)), state.evaluated
    found: list[tuple[list[int], float]] = []
    evaluated = 0
    for t_end in ends:
        if any(not c for c in inner[:t_end]):
            continue
        seqs = [list(c) + [spans.end_id] for c in itertools.product(*inner[:t_end])]
        found += _accept(att, spans, seqs)
        evaluated += len(seqs)
    return found, evaluated


def _accept(att: Dager, spans: Spans, seqs: list[list[int]]) -> list[tuple[list[int], float]]:
    out = []
    for s, d in zip(seqs, spans.distances(seqs), strict=True):
        if float(d.max()) < att.l2_threshold:
            out.append((s, float(d.max())))
    return out
