"""Token positions of a BERT-style encoder batch from its embedding-layer gradient.

On a model whose first block sees ``LN(E_v + P_p + S)`` the layer-1 span test cannot place a
token: the span of the batch's inputs contains the centred directions of every token and
every position it holds, so every token of the batch passes at every position (measured on
all-MiniLM-L6-v2: 74-82 candidates per position at distance 1e-15, see docs/decisions.md).
The embedding gradient places them instead. The input ``x = E_v + P_p + S`` of the embedding
LayerNorm receives ``g = dL/dx``, and LayerNorm's backward pass makes ``g`` orthogonal to the
centred input ``x - mean(x)``. The word-embedding gradient's row ``v`` is the sum of ``g`` over
the occurrences of ``v``; for a token that occurs once (or only at one position) it is
orthogonal to ``x - mean(x)`` at that position and at no other: a scalar test per position.
Tokens that occur at several positions stay candidates wherever the position-embedding
gradient's row ``p`` is not explained by the tokens placed at ``p``.

This is our addition to DAGER's search (Petrov et al., *DAGER*, NeurIPS 2024), which uses only
the Q/K/V gradients; the orthogonality of LayerNorm's input gradient is standard calculus.
"""

from __future__ import annotations

import torch

from trainleak.releases.transformer_update import TransformerUpdate

_NAMES = ("word_embeddings", "position_embeddings", "token_type_embeddings")


def _tables(release: TransformerUpdate) -> dict[str, tuple[torch.Tensor, torch.Tensor]] | None:
    """Weight and gradient of the three BERT embedding tables, or ``None`` when absent."""
    out = {}
    for name, mod in release.model.module.named_modules():
        short = name.rsplit(".", 1)[-1]
        if short in _NAMES and isinstance(mod, torch.nn.Embedding):
            grad = release.update.get(f"{name}.weight")
            if grad is None:
                return None
            out[short] = (mod.weight.detach().double(), grad.detach().double())
    return out if len(out) == len(_NAMES) else None


def _place(
    rows: dict[int, torch.Tensor], centred: dict[int, torch.Tensor], ratio: float
) -> dict[int, int]:
    """Tokens whose (remaining) gradient row is orthogonal to their centred input at exactly
    one position: smallest cosine below ``ratio`` times the next smallest."""
    out = {}
    for v, g in rows.items():
        x = centred[v]  # (n, d)
        cos = (x @ g).abs() / (x.norm(dim=1) * g.norm()).clamp_min(1e-300)
        low = cos.topk(min(2, cos.shape[0]), largest=False).values
        if cos.shape[0] == 1 or float(low[0]) < ratio * float(low[1]):
            out[v] = int(cos.argmin())
    return out


def _peel(
    rows: dict[int, torch.Tensor],
    gpos: torch.Tensor,
    centred: dict[int, torch.Tensor],
    ratio: float,
    residual: float,
    ortho: float,
) -> tuple[list[set[int]], set[int]]:
    """Place tokens, then repeatedly: a position whose row, less the rows of the tokens placed
    there, is orthogonal to exactly one unplaced token's input holds that token once, with that
    residual as its gradient; subtracting it from the token's row may place the token's other
    occurrences. Returns the placed tokens per position and the tokens left unplaced."""
    n = gpos.shape[0]
    size = {v: float(g.norm()) for v, g in rows.items()}
    sets: list[set[int]] = [set() for _ in range(n)]
    rest = gpos.clone()
    scale = gpos.norm(dim=1)
    for _ in range(4 * n):
        new = _place(rows, centred, ratio)
        for v, p in new.items():
            sets[p].add(v)
            rest[p] -= rows.pop(v)
        open_ = [p for p in range(n) if float(rest[p].norm()) > residual * float(scale[p])]
        found = False
        for p in open_:
            hits = [v for v in rows if _cos(centred[v][p], rest[p]) < ortho]
            if len(hits) == 1:
                v = hits[0]
                sets[p].add(v)
                rows[v] = rows[v] - rest[p]
                rest[p] = torch.zeros_like(rest[p])
                if float(rows[v].norm()) <= residual * size[v]:
                    rows.pop(v)
                found = True
        if not new and not found:
            break
    loose = set(rows)
    return [
        s | (loose if float(rest[p].norm()) > residual * float(scale[p]) else set())
        for p, s in enumerate(sets)
    ], loose


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a @ b).abs() / (a.norm() * b.norm()).clamp_min(1e-300))


def placed_candidates(
    release: TransformerUpdate,
    *,
    ratio: float = 1e-3,
    residual: float = 1e-6,
    ortho: float = 1e-8,
) -> list[set[int]] | None:
    """Per position the tokens that may stand there (see :func:`_peel`): placed tokens, plus
    every unplaced token where the position-embedding gradient's row is not explained by the
    placed ones (more than ``residual`` of its norm left). ``None`` on a model without
    BERT-style embedding tables (decoders, RoPE) or on a noised gradient, where the exact
    residual tests do not apply. ``ortho``: largest cosine of an exactly orthogonal pair in
    float64 (measured ~1e-11; unrelated pairs ~1e-6 and above)."""
    tabs = _tables(release)
    if tabs is None or release.model.kind != "encoder":
        return None
    (word, gword), (pos, gpos), (seg, _) = (tabs[k] for k in _NAMES)
    norms = gword.norm(dim=1)
    if not bool((norms == 0).any()):  # noised (or every token used): no exact zeros
        return None
    n = release.max_length
    bag = torch.nonzero(norms > 0).flatten().tolist()
    x = word[bag][:, None] + pos[:n][None] + seg[0]
    centred_rows = x - x.mean(-1, keepdim=True)
    centred = {v: centred_rows[i] for i, v in enumerate(bag)}
    rows = {v: gword[v] for v in bag}
    sets, _ = _peel(rows, gpos[:n].clone(), centred, ratio, residual, ortho)
    return [s if float(gpos[p].norm()) > 0 else set() for p, s in enumerate(sets)]
