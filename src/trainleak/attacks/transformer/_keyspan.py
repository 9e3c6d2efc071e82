"""A whole-sequence test from the first attention block's Q/K gradients, without a forward pass.

BERT's first block sees ``z = LN(E_v + P_p + S) = (e_v + f_p + s) / sigma + beta`` (``e_v``,
``f_p``, ``s``: the centred embeddings scaled by LayerNorm's gain; ``sigma``: the input's
standard deviation), so the Q/K weight gradient ``sum_t dq_t z_t^T`` is exactly
``C [e_v; f_p; s; beta]`` over the batch's tokens, its positions, ``s`` and ``beta`` (148
vectors for MiniLM's n = 32 benchmark batch, independent in 384 dimensions: least-squares
residual 1.3e-15). For a token that occurs once, its coefficient is ``dq_t / sigma_t`` (and
``dk_t / sigma_t``) of its one occurrence. Attention makes

* ``dq_t`` (per head) a combination of the keys ``k_j`` of the token's own sequence whose
  coefficients ``dL/ds_tj`` sum to zero (the softmax Jacobian): ``(dq_t, 0)`` lies in
  ``span{(k_j, 1) : j < L}``;
* ``dk_t`` a combination of the same sequence's queries: ``span{q_j : j < L}``.

Keys and queries of the first block depend only on the token and its position (``z`` has no
context), so a candidate sequence's spans cost a table look-up: the residual of the
coefficients of a token it holds is zero when the sequence is that token's own (MiniLM, n =
32: relative residual 1e-15 to 6e-13, against 0.17-0.71 for the other sequences of the
batch), and a wrong token at any position changes the span. A sequence of ``L`` tokens
leaves ``d_h + 1 - L`` constraints per head on ``dq`` (``d_h``: head width), so the test
holds for every ``L <= d_h``.

:func:`fix` uses it to repair a near miss of the growing search (:mod:`._assign`): the best
change of one or two positions by this residual, in closed form per pair of positions (the
other positions' span projected out), repeated while the residual falls. This is our addition
to the span tests of Petrov et al., *DAGER*, NeurIPS 2024; the softmax and LayerNorm identities
are standard calculus.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from trainleak.attacks.transformer._model import TokenLayer, layer_gradient
from trainleak.releases.transformer_update import TransformerUpdate

_EXACT = 1e-10  # relative decomposition residual of an exact (noiseless, float64) gradient


@dataclass(frozen=True)
class KeySpan:
    """The first block's key/query weights, the embedding ``tables`` and LayerNorm (keys and
    queries of any token at any position), and per token of the batch its Q coefficient
    (with a last coordinate 0: the softmax weights sum to zero) and K coefficient ``(H, *)``
    (``targets``)."""

    heads: int
    targets: dict[int, tuple[torch.Tensor, torch.Tensor]]
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
    tables: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    norm: torch.nn.Module

    def key_query(self, pos: int, tokens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys, each with a last coordinate 1, ``(len(tokens), H, d_h + 1)`` and queries
        ``(len(tokens), H, d_h)`` of ``tokens`` at ``pos``."""
        word, posit, seg = self.tables
        with torch.no_grad():
            z = self.norm(word[tokens] + posit[pos] + seg[0])
        wq, bq, wk, bk = self.weights
        k = (z @ wk.T + bk).reshape(len(tokens), self.heads, -1)
        q = (z @ wq.T + bq).reshape(len(tokens), self.heads, -1)
        return torch.cat([k, torch.ones_like(k[..., :1])], -1), q

    def columns(self, seq: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The sequence's keys ``(H, d_h + 1, L)`` and queries ``(H, d_h, L)``."""
        kq = [self.key_query(t, [v]) for t, v in enumerate(seq)]
        k = torch.cat([a for a, _ in kq])  # (L, H, dh + 1)
        q = torch.cat([b for _, b in kq])
        return k.permute(1, 2, 0), q.permute(1, 2, 0)

    def relative_sq(self, seq: list[int], anchors: list[int]) -> list[torch.Tensor]:
        """Per part (Q coefficients off the keys, K coefficients off the queries), the
        squared relative residual ``(H, m)`` of the ``anchors``' coefficients projected off
        the sequence's span, per head and anchor (0 for the anchors' own sequence)."""
        out = []
        for cols, part in zip(self.columns(seq), (0, 1), strict=True):
            y = torch.stack([self.targets[a][part] for a in anchors], -1)  # (H, dim, m)
            sol = torch.linalg.lstsq(cols, y).solution
            out.append(((y - cols @ sol) ** 2).sum(1) / (y**2).sum(1).clamp_min(1e-300))
        return out

    def residual(self, seq: list[int], anchors: list[int]) -> float:
        """Largest relative residual (a norm ratio) over both parts, the heads and the
        anchors (:meth:`relative_sq`)."""
        return max(float(r.max()) for r in self.relative_sq(seq, anchors)) ** 0.5


def keyspan(
    release: TransformerUpdate, module: torch.nn.Module, layer: TokenLayer
) -> KeySpan | None:
    """The key-span data of a noiseless BERT-style update (``module``: the attacker's float64
    copy, ``layer``: its first block's Q/K/V); ``None`` when the model has no BERT embedding
    tables, its Q/K/V are not plain ``Linear`` layers, every word-embedding row has a
    gradient (noise), the batch's tokens and positions leave no direction of the width
    free, or the gradient does not decompose exactly."""
    mods = dict(module.named_modules())
    parts = {}
    for name, mod in mods.items():
        short = name.rsplit(".", 1)[-1]
        if short in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            parts[short] = mod
        if name.endswith("embeddings.LayerNorm"):
            parts["norm"] = mod
    lin = [mods[n] for n in layer.names]
    if len(parts) != 4 or len(lin) != 3 or layer.transposed:
        return None
    if not all(isinstance(m, torch.nn.Linear) and m.bias is not None for m in lin):
        return None
    heads = int(getattr(getattr(module, "config", None), "num_attention_heads", 0) or 0)
    word, posit, seg = (
        parts[k].weight.detach().double()
        for k in ("word_embeddings", "position_embeddings", "token_type_embeddings")
    )
    norm = parts["norm"]
    grad = release.update.get(next(n for n in mods if n.endswith("word_embeddings")) + ".weight")
    if heads <= 0 or grad is None or not isinstance(norm, torch.nn.LayerNorm):
        return None
    norms = grad.detach().double().norm(dim=1)
    bag = torch.nonzero(norms > 0).flatten().tolist()
    width = int(word.shape[1])
    # noise leaves no row exactly zero; with as many directions as the width every
    # gradient decomposes and exactness tests nothing
    if len(bag) == len(norms) or len(bag) + release.max_length + 2 >= width:
        return None
    gain, bias = norm.weight.detach().double(), norm.bias.detach().double()

    def centred(x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(-1, keepdim=True)) * gain

    n = release.max_length
    basis = torch.cat([centred(word[bag]), centred(posit[:n]), centred(seg[:1]), bias[None]])
    g = layer_gradient(release, layer)[: 2 * lin[0].out_features]  # Q and K rows
    coef = torch.linalg.lstsq(basis.T, g.T).solution  # (m, 2 d)
    if float((coef.T @ basis - g).norm()) > _EXACT * float(g.norm()):
        return None
    d = lin[0].out_features
    cq = coef[: len(bag), :d].reshape(len(bag), heads, -1)
    cq = torch.cat([cq, torch.zeros_like(cq[..., :1])], -1)
    targets = {v: (cq[i], coef[i, d:].reshape(heads, -1)) for i, v in enumerate(bag)}
    w = tuple(x for m in lin[:2] for x in (m.weight.detach().double(), m.bias.detach().double()))
    return KeySpan(heads, targets, w, (word, posit, seg), norm)  # type: ignore[arg-type]


def _complement(cols: torch.Tensor) -> torch.Tensor:
    """Orthonormal basis ``(H, d_h, c)`` of the complement of ``span(cols)`` per head."""
    u, s, _ = torch.linalg.svd(cols, full_matrices=True)
    r = int((s > 1e-10 * s.amax(-1, keepdim=True)).sum(-1).max()) if s.numel() else 0
    return u[..., r:]


def _pair_residuals(
    u: torch.Tensor, a: torch.Tensor, b: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """Per candidate pair ``(V1, V2)``: the summed relative residual of the targets ``y``
    ``(H, d_h, m)`` off ``span(a_v, b_w)`` after projecting ``u``'s complement
    (``a``: ``(V1, H, d_h)``, ``b``: ``(V2, H, d_h)``)."""
    pa = torch.einsum("hdc,vhd->vhc", u, a)
    pb = torch.einsum("hdc,vhd->vhc", u, b)
    py = torch.einsum("hdc,hdm->hcm", u, y)
    yy = (py**2).sum(1)  # (H, m)
    aa, bb = (pa**2).sum(-1), (pb**2).sum(-1)  # (V, H)
    ab = torch.einsum("vhc,whc->vwh", pa, pb)
    ay = torch.einsum("vhc,hcm->vhm", pa, py)
    by = torch.einsum("whc,hcm->whm", pb, py)
    det = (aa[:, None] * bb[None] - ab**2).clamp_min(1e-300)[..., None]
    proj = (
        bb[None, :, :, None] * ay[:, None] ** 2
        - 2 * ab[..., None] * ay[:, None] * by[None]
        + aa[:, None, :, None] * by[None] ** 2
    ) / det
    # a pair of parallel vectors (det ~ 0): the better single one
    single = torch.maximum(
        ay[:, None] ** 2 / aa[:, None, :, None].clamp_min(1e-300),
        by[None] ** 2 / bb[None, :, :, None].clamp_min(1e-300),
    )
    proj = torch.where(det > 1e-20 * (aa[:, None] * bb[None])[..., None], proj, single)
    scale = (y**2).sum(1).clamp_min(1e-300)  # (H, m)
    return ((yy - proj).clamp_min(0) / scale).sum((-1, -2))


def _excluding(cols: torch.Tensor, drop: tuple[int, ...]) -> torch.Tensor:
    keep = [i for i in range(cols.shape[-1]) if i not in drop]
    return cols[..., keep]


def _total(ks: KeySpan, seq: list[int], anchors: list[int]) -> float:
    """Summed squared relative residual of the anchors' coefficients off the spans."""
    return sum(float(r.sum()) for r in ks.relative_sq(seq, anchors))


def fix(
    ks: KeySpan,
    seq: list[int],
    anchors: list[tuple[int, int]],
    cands: list[list[int]],
    rounds: int = 3,
    tol: float = 1e-12,
) -> tuple[list[int], float]:
    """Repair ``seq`` (closed by the end token) by the anchors' key-span residual: each
    round makes the best change of one or two free positions (the anchors' positions and the
    end are kept) over ``cands``, at most ``rounds`` rounds, while the residual falls and is
    above ``tol``. Per pair of positions the other positions' span is projected out, so every
    candidate pair is scored in closed form. Returns the sequence and its residual (summed
    squared, relative, over heads and anchors; ~1e-26 for the anchors' own sequence)."""
    seq = list(seq)
    length = len(seq)
    if length > ks.targets[anchors[0][1]][1].shape[-1]:  # no constraint per head is left
        return seq, _total(ks, seq, [v for _, v in anchors])
    fixed = {t for t, _ in anchors}
    free = [t for t in range(length - 1) if len(cands[t]) >= 2 and t not in fixed]
    ys = [torch.stack([ks.targets[v][p] for _, v in anchors], -1) for p in (0, 1)]
    tabs = {t: ks.key_query(t, cands[t]) for t in free}
    best = _total(ks, seq, [v for _, v in anchors])
    if len(free) == 1:  # no pair: every candidate at the one free position
        t = free[0]
        trials = [seq[:t] + [v] + seq[t + 1 :] for v in cands[t]]
        scored = [(_total(ks, s, [v for _, v in anchors]), s) for s in trials]
        low, out = min([(best, seq), *scored], key=lambda x: x[0])
        return out, low
    for _ in range(rounds):
        if best <= tol:
            break
        cols = ks.columns(seq)
        top = (best, seq)
        for j1, j2 in itertools.combinations(free, 2):
            u = [_complement(_excluding(c, (j1, j2))) for c in cols]
            r = _pair_residuals(u[0], tabs[j1][0], tabs[j2][0], ys[0])
            r = r + _pair_residuals(u[1], tabs[j1][1], tabs[j2][1], ys[1])
            i = int(r.argmin())
            val = float(r.flatten()[i])
            if val < top[0]:
                s = list(seq)
                s[j1], s[j2] = cands[j1][i // r.shape[1]], cands[j2][i % r.shape[1]]
                top = (val, s)
        if top[1] == seq:
            break
        best, seq = top
    return seq, best
