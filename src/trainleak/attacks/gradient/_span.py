"""Erasure decoding in the span of the first-layer gradient (passive mode, beyond peeling).

When no row holds a single sample any more, the residual first-layer gradient
``G = (1/B) sum_i delta_i x~_i^T`` (``x~ = (x, 1)``) of the ``n`` remaining samples has rank
``n`` and its column space is spanned by the per-sample pre-activation gradients ``delta_i``.
Each ``delta_i`` vanishes on the neurons sample ``i`` leaves inactive (its erasures). For an
erasure set ``E`` inactive for sample ``i``, ``delta_i`` lies in the null space of ``U[E]``
(``U`` a basis of the column space): the unique codeword of the span that vanishes on ``E``.

Erasure sets are guessed from the uncertified row proposals (weighted means of a few samples):
the neurons on which a proposal is most negative are very likely off for each of its members
[inferred]. A found vector is accepted as some ``delta_i`` only if, on its support ``S``, it is
reproduced by the next layer, ``v_S = W2[:, S]^T g`` (one back-propagated signal ``g``), which a
mixture of two samples with different supports is not. With ``n`` independent ``delta``'s the
batch follows from one least-squares solve, ``G = Delta^T V``, and ``x_i = V_i[:d] / V_i[d]``.
Each solved sample is accepted separately: its own pre-activation gradient under one label
must equal ``B V_i[d] delta_i`` on every neuron (an acceptance test; what is proven about the
decoded batch is decided by :mod:`trainleak.attacks.gradient._certificate`).

References:
    Dimitrov, Baader, Mueller, Vechev, *SPEAR: Exact Gradient Inversion of Batches in
    Federated Learning*, NeurIPS 2024, Sec. 4 (sparse vectors of the gradient's column space).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainleak.models.functional import FirstLayerSplit


@dataclass(frozen=True)
class SpanState:
    """The residual's live rows and thin SVD (rank ``n``), and the codewords found in it."""

    live: torch.Tensor
    u: torch.Tensor  # (|live|, n)
    s: torch.Tensor  # (n,)
    vh: torch.Tensor  # (n, d + 1)
    words: torch.Tensor  # (k, |live|)


class SpanDecoder:
    """Find the ``delta`` codewords of a residual first-layer gradient and solve for the batch.

    Args:
        split: the model seen at its first layer.
        next_weight: weight of the layer after the first ``(h, m)``.
        rtol: relative tolerance of every test.
        generator: randomness of the codeword search.
    """

    def __init__(
        self,
        split: FirstLayerSplit,
        next_weight: torch.Tensor,
        rtol: float,
        generator: torch.Generator,
    ) -> None:
        self.split, self.w2, self.rtol, self.gen = split, next_weight, rtol, generator
        self._memory: list[torch.Tensor] = []

    def codewords(self, g: torch.Tensor, n: int, proposals: torch.Tensor) -> SpanState | None:
        """Search codewords in the residual ``g`` (``(m, d + 1)``) of ``n`` samples.

        Returns ``None`` when ``g`` has no clear rank-``n`` gap (noise, or a wrong count) or
        no codeword is found.
        """
        scale = float(g.abs().max()) or 1.0
        live = torch.nonzero(g.abs().amax(1) > self.rtol * 1e-3 * scale).squeeze(1)
        if live.numel() <= n:
            return None
        u, s, vh = torch.linalg.svd(g[live], full_matrices=False)
        if s.numel() <= n or not bool(s[n - 1] > 1e3 * s[n]):
            return None
        basis = u[:, :n]
        found = self._cached(basis, live)
        pre = self.split.pre_activation(proposals)[:, live]
        erase = torch.argsort(pre, dim=1)[:, : n + 4]  # (P, n + 4)
        sv = torch.linalg.svdvals(basis[erase])  # batched: (P, n)
        q = (sv <= sv[:, :1] * 1e-7).sum(1)
        for p in torch.nonzero((q >= 1) & (q <= 8)).squeeze(1).tolist():
            if len(found) >= n and _independent(found, n):
                break
            for v in self._search(basis, erase[p], live):
                if not any(float((v - w).abs().max()) < 1e-6 for w in found):
                    found.append(v)
        if not found:
            return None
        self._remember(found, live, g.shape[0])
        return SpanState(live, basis, s[:n], vh[:n], torch.stack(found))

    def _cached(self, basis: torch.Tensor, live: torch.Tensor) -> list[torch.Tensor]:
        """Codewords of earlier rounds that still lie in the column space (their samples remain)."""
        out = []
        for w in self._memory:
            v = w[live]
            if float(v.abs().max()) == 0 or float(w.abs().sum() - v.abs().sum()) > 1e-9:
                continue
            v = _normalise(v)
            if float((v - basis @ (basis.T @ v)).abs().max()) <= 1e-8:
                out.append(v)
        return out

    def _remember(self, found: list[torch.Tensor], live: torch.Tensor, m: int) -> None:
        self._memory = []
        for v in found:
            w = torch.zeros(m, dtype=v.dtype)
            w[live] = v
            self._memory.append(w)

    def _search(
        self, basis: torch.Tensor, erase: torch.Tensor, live: torch.Tensor
    ) -> list[torch.Tensor]:
        """Codewords vanishing on ``erase``; several when the null space is larger than one.

        For a ``q``-dimensional null space, ``8 q`` random sets of ``q - 1`` further rows each
        fix one vector (batched); the sparsest ones are tested for being a single sample's.
        """
        sub = basis[erase]
        _, s, vh = torch.linalg.svd(sub, full_matrices=True)
        rank = int((s > s[0] * 1e-7).sum()) if s.numel() else 0
        null = vh[rank:].T  # (n, q)
        q = null.shape[1]
        if q == 0 or q > 8:
            return []
        space = basis @ null  # (|live|, q)
        if q == 1:
            cands = space
        else:
            t = 8 * q
            rows = torch.stack(
                [torch.randperm(space.shape[0], generator=self.gen)[: q - 1] for _ in range(t)]
            )
            _, _, wh = torch.linalg.svd(space[rows], full_matrices=True)  # (t, q, q)
            cands = space @ wh[:, -1, :].T  # (|live|, t)
            zeros = (cands.abs() <= 1e-9 * cands.abs().amax(0)).sum(0)
            cands = cands[:, zeros >= 0.9 * zeros.max()]
        out: list[torch.Tensor] = []
        for k in range(cands.shape[1]):
            v = _normalise(cands[:, k])
            if any(float((v - w).abs().max()) < 1e-6 for w in out):
                continue
            if self._is_single(v, live):
                out.append(v)
        return out

    def _is_single(self, v: torch.Tensor, live: torch.Tensor) -> bool:
        """Whether ``v`` is one sample's delta: its support is explained by the next layer."""
        support = v.abs() > 1e-9
        k = int(support.sum())
        cols = live[support]
        if k <= self.w2.shape[0] + 4 or k == v.numel():
            return False
        a = self.w2[:, cols].T  # (k, h)
        sol = torch.linalg.lstsq(a, v[support].unsqueeze(1), driver="gelsd").solution
        resid = (a @ sol).squeeze(1) - v[support]
        return float(resid.abs().max()) <= 1e-6 * float(v.abs().max())

    def solve(self, g: torch.Tensor, state: SpanState, n: int) -> torch.Tensor:
        """Solve ``G = Delta^T V`` with the codewords, completed to ``n`` by the span's rest.

        With all ``n`` codewords every row of ``V`` is one sample. With ``n - 1`` correct ones
        the completing row is exactly the last sample (the others are then mixtures, which
        the certificate refuses). Returns the candidate inputs ``(n, d)``.
        """
        words = state.words[_pick_independent(state.words, n)]
        if words.shape[0] < n:  # complete with the orthogonal rest of the column space
            q, _ = torch.linalg.qr(torch.cat([words.T, state.u], dim=1))
            words = torch.cat([words, q[:, words.shape[0] : n].T])
        v = torch.linalg.lstsq(words.T, g[state.live], driver="gelsd").solution  # (n, d+1)
        return v[:, :-1] / v[:, -1:]

    def rank_drop(
        self, state: SpanState, g: torch.Tensor, x: torch.Tensor, u: torch.Tensor, b: float
    ) -> torch.Tensor:
        """Certificate: subtracting ``u x~^T / B`` lowers the residual's rank by one.

        ``u`` (``(k, m)``) must lie in the column space (and vanish on dead rows), and
        ``x~^T G^+ u / B = 1`` (the rank-one update condition).
        """
        dead = torch.ones(g.shape[0], dtype=torch.bool)
        dead[state.live] = False
        ul = u[:, state.live]
        unorm = u.abs().amax(1).clamp_min(1e-300)
        inside = (ul - (ul @ state.u) @ state.u.T).abs().amax(1) <= self.rtol * unorm
        off = u[:, dead].abs().amax(1) <= self.rtol * unorm if bool(dead.any()) else inside
        xt = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], dim=1)
        gain = ((xt @ state.vh.T) / state.s * (ul @ state.u)).sum(1) / b
        return inside & off & ((gain - 1).abs() <= self.rtol)


def _normalise(v: torch.Tensor) -> torch.Tensor:
    v = v / v.abs().max()
    return v * torch.sign(v[v.abs().argmax()])


def _independent(vectors: list[torch.Tensor], n: int) -> bool:
    s = torch.linalg.svdvals(torch.stack(vectors))
    return int((s > s[0] * 1e-8).sum()) >= n


def _pick_independent(words: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy choice of ``n`` linearly independent rows of ``words``."""
    chosen: list[int] = []
    for i in range(words.shape[0]):
        trial = words[[*chosen, i]]
        s = torch.linalg.svdvals(trial)
        if int((s > s[0] * 1e-8).sum()) == len(chosen) + 1:
            chosen.append(i)
        if len(chosen) == n:
            break
    return torch.tensor(chosen, dtype=torch.long)
