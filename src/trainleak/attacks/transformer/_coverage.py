"""How many new directions of a gradient span a decoder's sequence explains.

On a LLaMA-style decoder (no position embedding: RoPE rotates queries and keys, so it changes
attention weights and nothing else) a run ``v v ... v`` of one token has the same hidden state
at every position at every layer: attention averages identical values, whatever the weights.
When ``v`` starts a sequence of the batch, every position of the run therefore passes both span
tests exactly (measured on SmolLM2-135M: layer-2 distance 6e-16 against 1e-15 to 6e-15 for the
true tokens, docs/decisions.md), and a search that ranks finished sequences by length and
distance returns the run. The true sequence differs in what it explains: its ``n`` positions
add ``n`` independent directions to the layer-2 span (the gradient's row space is spanned by
them), the run adds one. Sequences are therefore accepted greedily by the number of directions
they add to those already explained (our selection rule; DAGER, Petrov et al., NeurIPS 2024,
ranks by the span tests alone).
"""

from __future__ import annotations

import torch

from trainleak.attacks.transformer._spans import Spans


def new_directions(z: torch.Tensor, basis: torch.Tensor, tol: float) -> tuple[int, torch.Tensor]:
    """Gram-Schmidt of the rows of ``z`` ``(m, d)`` against the orthonormal columns of
    ``basis`` ``(d, k)``: how many rows leave a residual above ``tol``, and the basis extended
    by them."""
    cols = [basis]
    q = basis
    added = 0
    for row in z:
        r = row - q @ (q.T @ row)
        r = r - q @ (q.T @ r)  # twice is enough (Giraud et al. 2005)
        norm = float(r.norm())
        if norm > tol:
            cols.append((r / norm)[:, None])
            q = torch.cat(cols, 1)
            added += 1
    return added, q


def repeated(z: torch.Tensor, tol: float, basis: torch.Tensor | None = None) -> torch.Tensor:
    """Boolean ``(m,)``: rows of ``z`` that lie within ``tol`` of the span of the rows
    before them and of ``basis``'s orthonormal columns (a repeated hidden state adds nothing
    to the gradient)."""
    out = torch.zeros(z.shape[0], dtype=torch.bool)
    q = basis if basis is not None else z.new_zeros(z.shape[1], 0)
    for t in range(z.shape[0]):
        added, q = new_directions(z[t : t + 1], q, tol)
        out[t] = added == 0
    return out


def select(
    spans: Spans, found: list[tuple[list[int], float]], batch: int | None, tol: float
) -> list[tuple[list[int], float]]:
    """Up to ``batch`` of ``found`` (sequence, worst distance), accepted one at a time by the
    number of layer-2 directions each adds to those of the sequences accepted before it, then
    by length, then by distance; with ``batch`` unknown, while a sequence adds any."""
    if not found:
        return []
    feats = [f[1] for f in spans.features([s for s, _ in found])]
    q = feats[0].new_zeros(feats[0].shape[1], 0)
    left = list(range(len(found)))
    out: list[tuple[list[int], float]] = []
    while left and len(out) < (batch or len(found)):
        gains = [new_directions(feats[i], q, tol)[0] for i in left]
        k = min(
            range(len(left)),
            key=lambda j: (-gains[j], -len(found[left[j]][0]), found[left[j]][1]),
        )
        if batch is None and gains[k] == 0:
            break
        i = left.pop(k)
        out.append(found[i])
        q = new_directions(feats[i], q, tol)[1]
    return out
