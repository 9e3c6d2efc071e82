"""TIGER's two stages: the continuous optimisation of soft tokens (or free embeddings) against
the gradient subspaces, and the discrete local search on the same distance.

Continuous: ``B x n`` inputs, each a softmax over the ``K`` tokens nearest the layer-1 span at
its position (or a free embedding), run through the model's own first blocks; the loss is
``sum_l w_l mean dist^2(z_l, R_l)`` plus a coverage term (the part of each basis direction of
``R_l`` that the ``B n`` reconstructed vectors leave unexplained, by a ridge projection: the
true batch explains all of it, a collapsed one does not) plus, for decoders, an optional
language-model prior (cross-entropy of the model's next-token prediction against the next soft
token). Discrete: each sequence is snapped to its argmax tokens, then improved by coordinate
moves (every candidate at one position, or a new length closed by the end token) on
``J = sum_t (d1^2 + d2^2 - gamma_t)``, where ``gamma_t`` is ``margin`` times the median squared
layer-1 distance of a vocabulary token at ``t`` (a position is worth keeping when it fits better
than that, so lengths need no threshold).

References:
    Kalikman, Petrov, Dimitrov, Vechev, *TIGER: Inverting Transformer Gradients via
    Embedding-Subspace Distance Optimization*, arXiv 2606.18312 (2026); the objective as
    reconstructed in docs/decisions.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from trainleak.attacks.transformer._coverage import new_directions, repeated
from trainleak.attacks.transformer._model import layer_inputs
from trainleak.attacks.transformer._spans import Spans
from trainleak.linalg import span_distance


@dataclass(frozen=True)
class Continuous:
    """Settings of the continuous stage."""

    steps: int
    lr: float
    temperature: float
    weights: tuple[float, float]
    coverage: float
    lm_prior: float
    soft_tokens: bool


def coverage(
    z: torch.Tensor, basis: torch.Tensor, weights: torch.Tensor, ridge: float = 1e-3
) -> torch.Tensor:
    """Squared residuals of the basis directions after projection on ``span(z)``, weighted by
    the directions' singular-value shares (noise directions weigh little)."""
    u = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    gram = u @ u.T + ridge * torch.eye(u.shape[0], dtype=u.dtype)
    proj = u.T @ torch.linalg.solve(gram, u @ basis)
    return (weights * ((basis - proj) ** 2).sum(0)).sum()


def continuous_stage(
    spans: Spans, cands: torch.Tensor, batch: int, cfg: Continuous, generator: torch.Generator
) -> tuple[torch.Tensor, list[float]]:
    """Optimise and decode: token ids ``(batch, n)`` and the loss trace."""
    module = spans.module
    table = module.get_input_embeddings().weight.detach()  # type: ignore[operator]
    emb = table[cands]  # (n, K, d)
    n, k, _ = emb.shape
    if cfg.soft_tokens:
        var = 0.01 * torch.randn(batch, n, k, generator=generator, dtype=emb.dtype)
    else:
        pick = torch.randint(k, (batch, n), generator=generator)
        var = emb[torch.arange(n), pick].clone() + 0.01 * torch.randn(
            batch, n, emb.shape[-1], generator=generator, dtype=emb.dtype
        )
    var.requires_grad_(True)
    opt = torch.optim.Adam([var], lr=cfg.lr)
    trace: list[float] = []
    for _ in range(cfg.steps):
        opt.zero_grad()
        loss = _loss(spans, cands, emb, var, cfg)
        loss.backward()
        opt.step()
        trace.append(float(loss.detach()))
    with torch.no_grad():
        if cfg.soft_tokens:
            idx = var.argmax(-1)
        else:
            unit = emb / emb.norm(dim=-1, keepdim=True)
            idx = torch.einsum("bnd,nkd->bnk", var, unit).argmax(-1)
    return cands[torch.arange(n)[None, :], idx], trace


def _loss(
    spans: Spans, cands: torch.Tensor, emb: torch.Tensor, var: torch.Tensor, cfg: Continuous
) -> torch.Tensor:
    batch, n = var.shape[:2]
    w = torch.softmax(var / cfg.temperature, -1) if cfg.soft_tokens else None
    x = torch.einsum("bnk,nkd->bnd", w, emb) if w is not None else var
    mask = torch.ones(batch, n, dtype=torch.long)
    zs = layer_inputs(spans.module, spans.layers, inputs_embeds=x, attention_mask=mask)
    loss = x.new_zeros(())
    for z, basis, share, weight in zip(zs, spans.bases, spans.weights, cfg.weights, strict=True):
        loss = loss + weight * (span_distance(z, basis) ** 2).mean()
        if cfg.coverage > 0:
            loss = loss + cfg.coverage * coverage(z.reshape(-1, z.shape[-1]), basis, share)
    if cfg.lm_prior > 0 and spans.causal and w is not None and n > 1:
        logits = spans.module(inputs_embeds=x, attention_mask=mask).logits
        logp = torch.log_softmax(logits[:, :-1], -1)  # (B, n-1, V)
        nxt = logp.gather(-1, cands[1:][None].expand(batch, -1, -1))  # (B, n-1, K)
        loss = loss - cfg.lm_prior * (w[:, 1:] * nxt).sum(-1).mean()
    return loss


@dataclass
class Peeling:
    """The objective of the discrete stage, with the inputs already explained.

    ``J(s) = sum_t (d1^2 + d2^2 - gamma_t * new_t)``, where ``new_t`` is 0 when the position's
    layer-2 input is (up to ``cos^2 > 1 - same_tol``) one of the sequences accepted so far
    (same token after the same prefix on a decoder; on an encoder a copy, or a near copy whose
    other tokens move every position only slightly) and 1 otherwise: a copy or a prefix of an
    accepted sequence earns nothing. On a decoder a copy or a prefix repeats the accepted
    inputs exactly, and unrelated positions can be near-parallel (SmolLM2: ``cos^2`` up to
    0.996 between positions of different sentences), so there ``new_t`` is 0 when the input
    lies within ``repeat_tol`` of the span of the accepted inputs and of the positions before
    it in the same sequence (``decoder_basis``): a run of one token repeats its hidden state
    exactly on a LLaMA-style block (:mod:`._coverage`). The inputs are computed by the model,
    not read from the noisy gradient, so the tolerances do not depend on the noise. Encoders
    average the terms over positions instead of summing them: only the complete sequence fits
    an encoder's span (every token moves every position), so a sum would favour short near
    misses.
    """

    spans: Spans
    gamma: torch.Tensor
    explained: list[torch.Tensor | None]
    taken: set[tuple[int, ...]] = field(default_factory=set)
    same_tol: float = 0.01
    repeat_tol: float = 1e-6
    decoder_basis: torch.Tensor | None = None

    def scores(self, seqs: list[list[int]]) -> list[float]:
        out = []
        for f in self.spans.features(seqs):
            cost = torch.zeros(f[0].shape[0], dtype=f[0].dtype)
            new = torch.zeros_like(cost)
            for layer, z in enumerate(f):
                basis = self.spans.bases[layer]
                inside = ((z @ basis) ** 2).sum(-1)
                cost = cost + (1 - inside).clamp_min(0)
                known = self.explained[layer]
                if layer == 1 and self.spans.causal:
                    new = (~repeated(z, self.repeat_tol, self.decoder_basis)).to(z.dtype)
                elif layer == 1 and known is not None:
                    same = ((z @ known) ** 2).max(-1).values > 1 - self.same_tol
                    new = (~same).to(z.dtype)
                elif layer == 1:
                    new = torch.ones_like(inside)
            per = cost - self.gamma[: cost.shape[0]] * new
            out.append(float(per.sum() if self.spans.causal else per.mean()))
        return [math.inf if tuple(s) in self.taken else j for s, j in zip(seqs, out, strict=True)]

    def accept(self, seq: list[int]) -> None:
        """Add ``seq``'s unit inputs to the explained ones; it may not be chosen again."""
        self.taken.add(tuple(seq))
        f = self.spans.features([seq])[0]
        for layer, z in enumerate(f):
            known = self.explained[layer]
            self.explained[layer] = z.T if known is None else torch.cat([known, z.T], 1)
        if self.spans.causal:
            start = self.decoder_basis
            start = start if start is not None else f[1].new_zeros(f[1].shape[1], 0)
            self.decoder_basis = new_directions(f[1], start, self.repeat_tol)[1]


def local_search(
    obj: Peeling, init: list[int], cands: torch.Tensor, sweeps: int
) -> tuple[list[int], float]:
    """Coordinate moves from ``init`` (``n`` decoded tokens): each sweep sets every position to
    its best candidate (scored on the sequence closed just after it, or at the current length
    when that is longer), then picks the best length; returns the sequence (closed by the end
    token) and its ``J``."""
    end = obj.spans.end_id
    body = list(init)
    length = _best_length(obj, body)
    best = obj.scores([body[: length - 1] + [end]])[0]
    for _ in range(sweeps):
        before = best
        for t in range(len(body) - 1):
            upto = max(length, t + 2)
            trials = []
            for v in cands[t].tolist():
                s = body[: upto - 1]
                s[t] = v
                trials.append(s + [end])
            scores = obj.scores(trials)
            i = min(range(len(trials)), key=scores.__getitem__)
            body[t] = trials[i][t]
            if upto == length:
                best = min(best, scores[i])
        length = _best_length(obj, body)
        best = obj.scores([body[: length - 1] + [end]])[0]
        if best >= before:
            break
    return body[: length - 1] + [end], best


def beam_start(obj: Peeling, cands: torch.Tensor, width: int) -> list[int]:
    """A start built left to right by a beam of ``width`` prefixes, each scored by ``J`` of the
    prefix closed by the end token (exact for a decoder's prefixes, a heuristic for encoders);
    returns the best closed prefix seen at any length. No threshold: prefixes compete on
    ``J``, so ties between explained prefixes survive until one earns new margin."""
    end = obj.spans.end_id
    beam: list[list[int]] = [[]]
    best: list[int] = [int(cands[0, 0]), end]
    best_j = math.inf
    for t in range(cands.shape[0] - 1):
        trials = [p + [v] for p in beam for v in cands[t].tolist()]
        scores = obj.scores([p + [end] for p in trials])
        order = sorted(range(len(trials)), key=scores.__getitem__)[:width]
        beam = [trials[i] for i in order]
        if scores[order[0]] < best_j:
            best, best_j = beam[0] + [end], scores[order[0]]
    return [int(v) for v in best]


def unused_start(cands: torch.Tensor, accepted: list[list[int]]) -> list[int]:
    """A start of the tokens nearest the layer-1 span that no accepted sequence holds at the
    same position (the nearest overall where every candidate is used)."""
    out = []
    for t in range(cands.shape[0]):
        used = {s[t] for s in accepted if len(s) > t}
        row = cands[t].tolist()
        out.append(next((v for v in row if v not in used), row[0]))
    return out


def _best_length(obj: Peeling, body: list[int]) -> int:
    """The length ``l`` (tokens, end token included) minimising ``J`` of ``body[:l-1] + end``."""
    lengths = list(range(2, len(body) + 1))
    scores = obj.scores([body[: ell - 1] + [obj.spans.end_id] for ell in lengths])
    return lengths[min(range(len(lengths)), key=scores.__getitem__)]
