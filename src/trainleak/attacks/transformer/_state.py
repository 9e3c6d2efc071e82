"""State of the encoder batch search (:mod:`._assign`): candidates, lengths, accepted
sequences and the deflated layer-2 span they define, the token count, and the scores of
closed sequences."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from trainleak.attacks.transformer._spans import Spans
from trainleak.linalg import span_distance

_COPY = 1e-6  # a deflated input shorter than this is an accepted sequence's own input


@dataclass
class Assignment:
    """Search state: candidates per position (end token excluded), the lengths whose last
    position may hold the end token, the accepted sequences (with the deflation of the
    layer-2 span they define) and the rejected attempts. ``grow``: restarts grow through the
    lengths (:func:`grow`); otherwise each is one free-length descent (cheaper where no
    sequence can pass, as on a noised gradient). ``repair``: most steepest-descent steps on a
    failed growth's best attempt; ``visited``: the sequences failed growths reached."""

    spans: Spans
    cands: list[list[int]]
    lengths: list[int]
    eps: float
    accept: float
    accepted: list[tuple[list[int], float]] = field(default_factory=list)
    rejected: list[tuple[list[int], float, float]] = field(default_factory=list)
    evaluated: int = 0
    deflation: tuple[torch.Tensor, torch.Tensor] | None = None
    grow: bool = True
    total: int | None = None
    slots: int | None = None
    repair: int = 8
    retrace: int = 3
    visited: set[tuple[int, ...]] = field(default_factory=set)
    pin: tuple[int, int] | None = None
    tried: set[tuple[int, int]] = field(default_factory=set)
    rescue: int = 2
    rescue_rounds: int = 8
    completed: bool = False

    def sites(self) -> list[tuple[int, int]]:
        """``(position, token)`` of every token that is a candidate at that position only
        (it occurs once in the batch, or only there: the embedding gradient placed it), in
        position order."""
        where: dict[int, list[int]] = {}
        for t, row in enumerate(self.cands):
            for v in row:
                where.setdefault(v, []).append(t)
        return [(t, v) for t in range(1, len(self.cands)) for v in self.cands[t] if where[v] == [t]]

    def next_anchor(self) -> tuple[int, int] | None:
        """The first untried site (:meth:`sites`) that no accepted sequence holds, in
        position order; ``None`` when all were tried."""
        for t, v in self.sites():
            held = any(len(s) > t and s[t] == v for s, _ in self.accepted)
            if (t, v) not in self.tried and not held:
                return t, v
        return None

    def open_lengths(self) -> list[int]:
        """The lengths a further sequence can have, given the token count ``total`` (when
        known) and ``slots`` sequences still to find (all lengths when none fits: the count
        is then not the batch's)."""
        if self.total is None or self.slots is None:
            return self.lengths
        left = self.total - sum(len(s) for s, _ in self.accepted)
        others = self.slots - len(self.accepted) - 1
        fit = [ell for ell in self.lengths if ell <= left - 2 * others]
        if others == 0:
            fit = [ell for ell in fit if ell == left]
        return fit or self.lengths

    def explained(self) -> bool:
        """Whether the accepted sequences hold every token of the batch."""
        return self.total is not None and sum(len(s) for s, _ in self.accepted) >= self.total

    def distances(self, seqs: list[list[int]]) -> list[torch.Tensor]:
        """Per closed sequence its ``(2, length)`` layer-1 and deflated layer-2 distances."""
        self.evaluated += len(seqs)
        out = []
        for z1, z2 in self.spans.features(seqs):
            d1 = span_distance(z1, self.spans.bases[0])
            out.append(torch.stack([d1, self._layer2(z2)]))
        return out

    def _layer2(self, z: torch.Tensor) -> torch.Tensor:
        if self.deflation is None:
            return span_distance(z, self.spans.bases[1])
        q, basis = self.deflation
        rest = z - (z @ q) @ q.T
        d = span_distance(rest, basis)
        return torch.where(rest.norm(dim=-1) < _COPY, torch.ones_like(d), d)

    def score(self, seqs: list[list[int]]) -> list[tuple[float, float]]:
        """``(J, worst distance)`` of each closed sequence."""
        out = []
        for d in self.distances(seqs):
            sq = (d**2).sum(0)
            out.append((float(torch.log(sq + self.eps).sum()), float(d.max())))
        return out

    def take(self, seq: list[int], worst: float) -> None:
        """Accept ``seq`` and deflate the layer-2 span by its inputs."""
        self.accepted.append((seq, worst))
        feats = torch.cat([f[1] for f in self.spans.features([s for s, _ in self.accepted])])
        _, sv, vh = torch.linalg.svd(feats, full_matrices=False)
        q = vh[: int((sv > 1e-8 * sv[0]).sum())].T
        basis = self.spans.bases[1]
        u, s2, _ = torch.linalg.svd(basis - q @ (q.T @ basis), full_matrices=False)
        self.deflation = (q, u[:, s2 > 0.5])

    def close(self, body: list[int], length: int) -> list[int]:
        return body[: length - 1] + [self.spans.end_id]
