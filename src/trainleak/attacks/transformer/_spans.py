"""The gradient subspaces of a transformer update and distances of candidate sequences to them,
shared by the DAGER span test and TIGER.

``Spans`` holds an attacker's float64 copy of the broadcast model, the bases ``R_l`` of the
first two token-wise layers (rank from a tolerance, or fixed to ``B * n`` under noise, Petrov
et al., *DAGER*, NeurIPS 2024, Sec. 4-5) and the layer-1 distance of every vocabulary token at
every position. ``distances(seqs)`` runs candidate sequences (padded as the client pads) and
returns each position's layer-1 and layer-2 distance; on a causal model the last position of
each sequence (the EOS the client appends) feeds no loss term and is not scored.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import torch

from trainleak.attacks.transformer._keyspan import KeySpan, keyspan
from trainleak.attacks.transformer._model import (
    TokenLayer,
    layer_gradient,
    layer_inputs,
    token_layer,
    vocabulary_inputs,
)
from trainleak.errors import ConfigError
from trainleak.linalg import row_space, span_distance
from trainleak.releases.transformer_update import TransformerUpdate, end_token

RankRule = Literal["tolerance", "batch"]


@dataclass(frozen=True)
class Spans:
    """Subspaces (with each direction's share of the singular values), the attacker's model
    and the layer-1 distance table ``(n, V)``. ``tokens``: the tolerance rank of the layer-2
    gradient, which without noise is the number of scored positions in the batch (each feeds
    its own input; with ``B * n`` below the width they are independent). ``keys``: the first
    block's key-span test (:mod:`._keyspan`; noiseless BERT-style encoders only)."""

    module: torch.nn.Module
    layers: tuple[TokenLayer, TokenLayer]
    bases: tuple[torch.Tensor, torch.Tensor]
    weights: tuple[torch.Tensor, torch.Tensor]
    table: torch.Tensor
    causal: bool
    end_id: int
    pad_id: int
    tokens: int | None = None
    keys: KeySpan | None = None

    @property
    def positions(self) -> int:
        return int(self.table.shape[0])

    def features(self, seqs: list[list[int]], chunk: int = 256) -> list[list[torch.Tensor]]:
        """Per sequence its unit layer-1 and layer-2 inputs ``(scored_len, d)``."""
        out: list[list[torch.Tensor]] = []
        for start in range(0, len(seqs), chunk):
            part = seqs[start : start + chunk]
            width = max(len(s) for s in part)
            ids = torch.full((len(part), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, s in enumerate(part):
                ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
                mask[i, : len(s)] = 1
            with torch.no_grad():
                z = layer_inputs(self.module, self.layers, input_ids=ids, attention_mask=mask)
            z = [v / v.norm(dim=-1, keepdim=True).clamp_min(1e-300) for v in z]
            for i, s in enumerate(part):
                m = self.scored(len(s))
                out.append([z[0][i, :m], z[1][i, :m]])
        return out

    def distances(self, seqs: list[list[int]], chunk: int = 256) -> list[torch.Tensor]:
        """Per sequence a ``(2, scored_len)`` tensor of layer-1 and layer-2 distances."""
        return [
            torch.stack([span_distance(z, basis) for z, basis in zip(f, self.bases, strict=True)])
            for f in self.features(seqs, chunk)
        ]

    @property
    def position_free(self) -> bool:
        """Whether a token's layer-1 input is the same at every position (LLaMA-style blocks
        see ``RMSNorm(E_v)``: RoPE acts after the projections), so layer 1 tests a bag."""
        return bool((self.table - self.table[:1]).abs().max() <= 1e-12)

    def scored(self, length: int) -> int:
        """How many leading positions of a sequence of ``length`` tokens feed the gradient."""
        return max(length - 1, 1) if self.causal else length


def _rank(b: int | None, n: int, rule: RankRule, exact: bool, width: int) -> int | None:
    if b is None:
        if rule == "batch" or exact:
            raise ConfigError(
                "the batch size B is unknown: the rank rule 'batch' and exact recovery need it"
            )
        return None
    if exact and b * n >= width:
        raise ConfigError(
            f"B*n = {b}*{n} = {b * n} is not below the layer width {width}: the gradient's row "
            "space can be the whole space, so the span test cannot certify a token; use fewer "
            "or shorter sequences, or a non-exact attack"
        )
    return min(b * n, width) if rule == "batch" else None


def build_spans(
    release: TransformerUpdate,
    *,
    batch: int | None,
    rank: RankRule,
    tol: float | None,
    exact: bool,
) -> Spans:
    """Subspaces of blocks 0 and 1 and the layer-1 table, for an attack on ``release`` with
    ``batch`` sequences (the attack's resolved batch size; ``None`` when unknown).

    Raises:
        ConfigError: fewer than two blocks, missing gradients, unknown ``B`` with a rule that
            needs it, or ``B*n`` not below the width with ``exact``.
    """
    module = copy.deepcopy(release.model.module).double().eval()
    layers = (token_layer(module, 0), token_layer(module, 1))
    grads = [layer_gradient(release, lay) for lay in layers]
    width = int(grads[0].shape[1])
    r = _rank(batch, release.max_length, rank, exact, width)
    bases = (row_space(grads[0], r, tol), row_space(grads[1], r, tol))
    vocab = len(release.model.tokenizer)
    table = torch.stack(
        [
            _token_distances(vocabulary_inputs(module, layers[0], t, vocab).detach(), bases[0])
            for t in range(release.max_length)
        ]
    )
    tok = release.model.tokenizer
    causal = release.kind == "causal"
    end = end_token(tok, release.kind)
    pad = tok.pad_token_id if tok.pad_token_id is not None else end
    weights = tuple(_weights(g, b.shape[1]) for g, b in zip(grads, bases, strict=True))
    # every scored position feeds the layer-2 gradient its own input: with B*n below the
    # width, the tolerance rank counts the batch's tokens (exact only without noise)
    tokens = int(row_space(grads[1], None, tol).shape[1])
    keys = None if causal else keyspan(release, module, layers[0])
    return Spans(module, layers, bases, weights, table, causal, int(end), int(pad), tokens, keys)  # type: ignore[arg-type]


def _token_distances(z: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """Layer-1 span distances; an all-zero input (a padding row of zeros, as a LLaMA
    embedding's ``padding_idx`` keeps) has no direction and gets distance 1, not 0."""
    d = span_distance(z, basis)
    return torch.where(z.norm(dim=-1) > 0, d, torch.ones_like(d))


def _weights(grad: torch.Tensor, rank: int) -> torch.Tensor:
    """Singular values of the kept directions, normalised to sum to one."""
    s = torch.linalg.svdvals(grad)[:rank]
    return s / s.sum().clamp_min(1e-300)
