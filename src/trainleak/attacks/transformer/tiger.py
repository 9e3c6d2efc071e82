"""TIGER: continuous gradient inversion of transformers by embedding-subspace distance.

Instead of thresholded membership tests, TIGER optimises the batch's inputs so the model's own
intermediate representations lie in the gradient row spaces of its first two token-wise
layers, decodes, and refines by discrete local search on the same distance; a final span check
certifies the sequences that pass DAGER's layer-2 test. Under noise the subspaces are the top
``B * n`` singular directions, and distances degrade gracefully where thresholds fail. Lengths
are unknown: each sequence's length is chosen by the same objective (see
:mod:`._tiger_search`). On a BERT-style encoder with a noiseless gradient the candidates are
the tokens the embedding gradient places at each position (:mod:`._localise`) and the
decodes start the restarted coordinate descent of :mod:`._assign` instead of the peeling
search.

References:
    Kalikman, Petrov, Dimitrov, Vechev, *TIGER: Inverting Transformer Gradients via
    Embedding-Subspace Distance Optimization*, arXiv 2606.18312 (2026); Petrov et al.,
    *DAGER*, NeurIPS 2024 (the subspace signal and the span check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.transformer._assign import Assignment, lengths_from, pad_body, search
from trainleak.attacks.transformer._localise import placed_candidates
from trainleak.attacks.transformer._output import batch_size, pack
from trainleak.attacks.transformer._spans import RankRule, Spans, build_spans
from trainleak.attacks.transformer._tiger_search import (
    Continuous,
    Peeling,
    beam_start,
    continuous_stage,
    local_search,
    unused_start,
)
from trainleak.errors import ConfigError
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.transformer_update import TransformerUpdate
from trainleak.validation import param

Parametrization = Literal["soft_tokens", "embeddings"]


@register_attack
@dataclass(frozen=True, kw_only=True)
class Tiger(Attack[TransformerUpdate]):
    """TIGER (see the module docstring).

    Args:
        candidates: tokens per position the soft tokens range over, the nearest to the
            layer-1 span (0: ``2 B + 2``, or ``B (n - 1)`` on a decoder whose layer-1 input
            does not depend on the position).
        parametrization: ``"soft_tokens"`` (softmax over candidate embeddings) or
            ``"embeddings"`` (free vectors, decoded to the nearest candidate by cosine).
        steps, lr, temperature: Adam steps, learning rate and softmax temperature.
        layer_weights: weights of the layer-1 and layer-2 distances.
        coverage_weight: weight of the coverage term against collapse.
        lm_prior: weight of the language-model prior (decoders only; 0 disables it).
        sweeps: discrete local-search sweeps per sequence.
        restarts: descents of the noiseless-encoder search, decodes included (0: ``6 B``).
        eps: floor added to the squared distances inside that search's logarithm.
        beam: width of the left-to-right beam that builds one more start per sequence slot
            besides the continuous stage's decodes (0: ``B``).
        margin: a position is worth keeping when its squared distances sum below ``margin``
            times the median squared layer-1 distance of a vocabulary token there (times the
            share of its direction not explained by the sequences accepted before it;
            sequences are accepted greedily, best first), and at most twice the square of
            ``floor_ratio`` times the median over the first half of the positions of the
            smallest layer-1 distance (the noise floor: those positions hold tokens), but not
            below ``min_margin`` (the squared distances of an exact fit in float64 are
            ~1e-30), so a noiseless gradient keeps only exact fits.
        rank: ``"batch"`` (top ``B * n`` directions) or ``"tolerance"``.
        tol: relative singular-value tolerance for ``rank="tolerance"``.
        span_check: layer-1/2 distance below which a sequence is certified.
        exact: refuse a batch with ``B * n`` not below the layer width.
    """

    name: ClassVar[str] = "tiger"
    summary: ClassVar[str] = "TIGER: soft-token subspace-distance optimisation (Kalikman 2026)"
    release_type: ClassVar[type[TransformerUpdate]] = TransformerUpdate

    candidates: int = param(0, ge=0, integer=True)
    parametrization: Parametrization = param("soft_tokens", choices=Parametrization)
    steps: int = param(150, ge=0, integer=True)
    lr: float = param(0.1, gt=0)
    temperature: float = param(1.0, gt=0)
    layer_weights: tuple[float, float] = (1.0, 1.0)
    coverage_weight: float = param(1.0, ge=0)
    lm_prior: float = param(0.0, ge=0)
    sweeps: int = param(3, ge=1, integer=True)
    restarts: int = param(0, ge=0, integer=True)
    eps: float = param(1e-12, gt=0, lt=1)
    beam: int = param(0, ge=0, integer=True)
    margin: float = param(0.25, gt=0, le=1)
    floor_ratio: float = param(20.0, gt=1)
    min_margin: float = param(1e-6, gt=0, lt=1)
    rank: RankRule = param("batch", choices=RankRule)
    tol: float | None = param(None, gt=0, lt=1)
    span_check: float = param(1e-3, gt=0, le=1)
    exact: bool = False

    def validate(self) -> None:
        if len(self.layer_weights) != 2 or min(self.layer_weights) < 0:
            raise ConfigError.invalid(
                "layer_weights", "two non-negative weights", self.layer_weights
            )

    def run(
        self,
        release: TransformerUpdate,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        batch = batch_size(release, knowledge)
        spans = build_spans(release, batch=batch, rank=self.rank, tol=self.tol, exact=self.exact)
        placed = placed_candidates(release)
        # layer 1 places no token on a LLaMA-style block: every token of the bag is a
        # candidate at every position
        bag = batch * spans.scored(spans.positions) if spans.position_free else 0
        cands = _candidates(spans.table, placed, self.candidates or max(2 * batch + 2, bag))
        # noise floor: the best layer-1 fit, typical over the first half of the positions
        floor = float(spans.table[: max(spans.positions // 2, 1)].min(dim=1).values.median())
        gamma = (self.margin * spans.table.pow(2).median(dim=1).values).clamp_max(
            max(2 * (self.floor_ratio * floor) ** 2, self.min_margin)
        )
        cfg = Continuous(
            self.steps,
            self.lr,
            self.temperature,
            self.layer_weights,
            self.coverage_weight,
            self.lm_prior,
            self.parametrization == "soft_tokens",
        )
        init, trace = continuous_stage(spans, cands, batch, cfg, generator)
        if placed is not None and not spans.causal:
            seqs, objectives = self._assign(spans, placed, init, batch, generator)
        else:
            obj = Peeling(spans, gamma, [None, None])
            seqs, objectives = self._peel(obj, [row.tolist() for row in init], cands, batch)
        worst = [float(d.max()) for d in spans.distances(seqs)]
        out = pack(
            seqs,
            batch,
            release.max_length,
            spans.pad_id,
            objectives=tuple(objectives),
            span_distance=tuple(worst),
        )
        return Reconstruction(
            out.inputs,
            scores=-torch.tensor(worst),
            certified=torch.tensor([w < self.span_check for w in worst]),
            diagnostics=out.diagnostics,
            trace=[{"step": float(i), "loss": v} for i, v in enumerate(trace)],
        )

    def _assign(
        self,
        spans: Spans,
        placed: list[set[int]],
        init: torch.Tensor,
        batch: int,
        generator: torch.Generator,
    ) -> tuple[list[list[int]], list[float]]:
        """Noiseless encoder: the decodes start the restarted descent of :mod:`._assign` over
        the placed tokens (the objective values reported are its worst span distances)."""
        full = [sorted(p) for p in placed]
        inner = [[v for v in row if v != spans.end_id] for row in full]
        lengths = lengths_from(full, spans.end_id) or [spans.positions]
        state = Assignment(spans, inner, lengths, self.eps, self.span_check, total=spans.tokens)
        starts = [pad_body(row.tolist(), inner, spans.end_id) for row in init]
        found = search(state, batch, starts, self.restarts or 6 * batch, self.sweeps, generator)
        return [s for s, _ in found], [w for _, w in found]

    def _peel(
        self, obj: Peeling, pool: list[list[int]], cands: torch.Tensor, batch: int
    ) -> tuple[list[list[int]], list[float]]:
        """Accept ``batch`` sequences greedily, best ``J`` first. Each decode is searched once
        and re-scored as sequences are accepted (searched again only when its result was
        taken); each slot also searches a beam start and an unused-token start."""
        searched = [local_search(obj, start, cands, self.sweeps) for start in pool]
        seqs: list[list[int]] = []
        objectives: list[float] = []
        for _ in range(batch):
            rescored = obj.scores([s for s, _ in searched]) if searched else []
            for i, j in enumerate(rescored):
                if j == float("inf"):
                    searched[i] = local_search(obj, searched[i][0], cands, self.sweeps)
                    rescored[i] = searched[i][1]
            extra = [beam_start(obj, cands, self.beam or batch)]
            if seqs:
                extra.append(unused_start(cands, seqs))
            fresh = [local_search(obj, start, cands, self.sweeps) for start in extra]
            options = [(s, j) for (s, _), j in zip(searched, rescored, strict=True)] + fresh
            i = min(range(len(options)), key=lambda k: options[k][1])
            seqs.append(options[i][0])
            objectives.append(options[i][1])
            obj.accept(options[i][0])
            if i < len(searched):
                searched.pop(i)
        return seqs, objectives

    def expected_shape(
        self, release: TransformerUpdate, knowledge: Knowledge
    ) -> tuple[int, ...] | None:
        return (release.max_length,)


def _candidates(table: torch.Tensor, placed: list[set[int]] | None, k: int) -> torch.Tensor:
    """``(n, K)`` token ids per position nearest the layer-1 span; with the embedding
    gradient's placement (encoders), only placed tokens, ``K`` raised to the largest placed
    set (a top-``K`` among tokens tied at float precision would drop true ones), rows short of
    ``K`` padded with their best token."""
    if placed is None:
        return table.topk(min(k, int(table.shape[1])), dim=1, largest=False).indices
    masked = torch.full_like(table, math.inf)
    for t, allowed in enumerate(placed):
        idx = torch.tensor(sorted(allowed) or [int(table[t].argmin())], dtype=torch.long)
        masked[t, idx] = table[t, idx]
    k = max(k, max(len(a) for a in placed))
    top = masked.topk(min(k, int(table.shape[1])), dim=1, largest=False)
    return torch.where(torch.isinf(top.values), top.indices[:, :1], top.indices)
