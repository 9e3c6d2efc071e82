"""The peeling decoder shared by the active and passive erasure-decoding attacks.

The first layer's gradient is read as a code. After a linear transform ``T`` of its rows
(identity for honest networks; consecutive differences inside each group for cumulative-bin
imprint layers) row ``r`` is ``(1/B) sum_i c_ir x_i`` with bias entry ``(1/B) sum_i c_ir``,
where ``c_ir`` is zero when sample ``i`` does not reach row ``r`` (an erasure). A row holding
one sample yields it exactly as ``x = row_W / row_b``. The decoder

1. proposes ``x = row_W / row_b`` for every row with a non-zero bias entry,
2. *accepts* a proposal for peeling when (a) it reaches its row, (b) a label ``y`` and a
   multiplicity ``k`` reproduce the row's bias entry, ``k c(x, y) / B``, to ``rtol`` (a
   multiplicity above one must be proposed by two rows), and (c) it lies in the known value
   range. This is a heuristic, not a proof: a weighted mean of near-identical samples passes
   (b) up to second order in their distance, and the weight part of the row carries no further
   test, since ``row_W - (row_b) x`` vanishes identically for ``x = row_W / row_b``;
3. subtracts the accepted samples' full per-sample gradients from every layer (peeling), and
   repeats on the rows that changed.

What is *proven* about the result is decided afterwards, by the certificate of
:mod:`trainleak.attacks.gradient._certificate`.

References:
    Luby, Mitzenmacher, Shokrollahi, Spielman, *Efficient Erasure Correcting Codes*, IEEE
    Trans. Inf. Theory 47(2), 2001 (peeling on the erasure channel).
    Fowl et al., *Robbing the Fed*, ICLR 2022 (``x = dW / db`` for an isolated sample).
    Dimitrov, Baader, Mueller, Vechev, *SPEAR: Exact Gradient Inversion of Batches in
    Federated Learning*, NeurIPS 2024 (ReLU sparsity of the first-layer gradient).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from trainleak.attacks.gradient._span import SpanDecoder
from trainleak.attacks.gradient.layout import difference_last, difference_rows
from trainleak.linalg import RowGroups, later_duplicates
from trainleak.models.functional import FirstLayerSplit, state_norm, sum_gradient_and_deltas
from trainleak.models.spec import StateDict
from trainleak.progress import Progress, report_every


@dataclass(frozen=True)
class DecoderSettings:
    """Tolerances and limits of one decoding run."""

    rtol: float
    row_floor: float
    merge_tol: float
    max_rounds: int
    max_multiplicity: int
    value_range: tuple[float, float] | None


@dataclass
class Proposals:
    """Candidate inputs read from rows, deduplicated."""

    x: torch.Tensor  # (n, d)
    row: torch.Tensor  # (n,) transformed row each was read from
    votes: torch.Tensor  # (n,) rows that proposed the same input


@dataclass
class DecodeOutcome:
    """Everything the decoder found."""

    x: list[torch.Tensor] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    votes: list[int] = field(default_factory=list)
    rounds: int = 0
    trace: list[dict[str, float]] = field(default_factory=list)
    batch_size: int | None = None
    residual_rel: float = float("nan")
    leftover: Proposals | None = None
    scale: float | None = None
    conflict: float | None = None


class PeelingDecoder:
    """Certified peeling on the first layer of an MLP (see the module docstring).

    Args:
        model: the model at the broadcast state, in the update's dtype.
        update: the FedSGD gradient, by parameter name.
        transform: ``(row, next)`` index pair of the row transform (see
            :meth:`trainleak.systems.federated.ImprintLayout.difference_index`).
        batch_size: ``B`` when the server knows it, else ``None`` (then inferred).
        settings: tolerances and limits.
    """

    def __init__(
        self,
        model: nn.Module,
        update: StateDict,
        transform: tuple[torch.Tensor, torch.Tensor],
        batch_size: int | None,
        settings: DecoderSettings,
        span: SpanDecoder | None = None,
    ) -> None:
        self.model, self.split, self.span = model, FirstLayerSplit(model), span
        self.rows = RowGroups(self.split.first.weight.detach())
        self.residual = {k: v.clone() for k, v in update.items()}
        self.row, self.nxt = transform
        self.given_b, self.settings = batch_size, settings
        self.b: int | None = batch_size
        self.scale: float | None = None if batch_size is None else float(batch_size)
        self.labels = torch.arange(int(self.split.tail(self._zero_h()).shape[1]))
        self.norm0 = state_norm(update)
        self._cache: tuple[Proposals, torch.Tensor, torch.Tensor] | None = None
        self._recovered = 0
        self._rows_cache: tuple[torch.Tensor, torch.Tensor] | None = None
        self.conflict: float | None = None
        self.floor = settings.row_floor * float(self._rows()[1].abs().max())
        self.mag = self._rows()[1].abs().clone()  # |bias entry| plus everything peeled from it

    def _zero_h(self) -> torch.Tensor:
        w = self.split.first.weight
        return torch.zeros(1, self.split.width, dtype=w.dtype)

    def _rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The transformed first-layer residual (cached until the next subtraction)."""
        if self._rows_cache is None:
            gw = self.residual[self.split.weight_key]
            gb = self.residual[self.split.bias_key]
            self._rows_cache = (
                difference_rows(gw, self.row, self.nxt),
                difference_rows(gb, self.row, self.nxt),
            )
        return self._rows_cache

    def propose(self, rows: torch.Tensor | None) -> Proposals:
        """Read ``x = row_W / row_b`` on ``rows`` (all when ``None``) and deduplicate."""
        rw, rb = self._rows()
        live = (rb.abs() > self.floor) & (rb.abs() > self.settings.row_floor * self.mag)
        if rows is not None:
            keep = torch.zeros_like(live)
            keep[rows] = True
            live &= keep
        idx = torch.nonzero(live).squeeze(1)
        x = rw[idx] / rb[idx].unsqueeze(1)
        finite = torch.isfinite(x).all(1)
        x, idx = x[finite], idx[finite]
        if x.shape[0] == 0:
            return Proposals(x, idx, torch.zeros(0, dtype=torch.long))
        scale = float(x.abs().max()) or 1.0
        key = torch.round(x / scale * 1e9).to(torch.int64)
        _, inverse, counts = torch.unique(key, dim=0, return_inverse=True, return_counts=True)
        first = torch.full((int(counts.shape[0]),), x.shape[0], dtype=torch.long)
        first.scatter_reduce_(0, inverse, torch.arange(x.shape[0]), reduce="amin")
        return Proposals(x[first], idx[first], counts)

    def run(self, progress: Progress | None) -> DecodeOutcome:
        """Peel until nothing new is accepted, the batch is complete or rounds run out."""
        out = DecodeOutcome()
        rows: torch.Tensor | None = None
        for rnd in range(self.settings.max_rounds):
            props = self.propose(rows)
            if rnd == 0:
                self._settle_batch_size(props)
            ok, labels, mult, mismatch = self.accept(props)
            found = self._merge(props.x, torch.nonzero(ok).squeeze(1), mismatch)
            xs, ys, ks = props.x[found], labels[found], mult[found]
            votes = props.votes[found]
            if found.numel() == 0 and rows is not None:
                rows = None  # nothing in the rows that changed: read every row once more
                continue
            if found.numel() == 0:
                xs, ys = self._span_round()
                ks = votes = torch.ones(xs.shape[0], dtype=torch.long)
                if xs.shape[0] == 0:
                    break
            changed = self._subtract(xs, ys, ks)
            rows = changed if found.numel() else None  # after a span solve, re-read all rows
            for i in range(xs.shape[0]):
                for _ in range(int(ks[i])):
                    out.x.append(xs[i])
                    out.labels.append(int(ys[i]))
                    out.votes.append(int(votes[i]))
            self._recovered = len(out.x)
            out.rounds = rnd + 1
            rel = state_norm(self.residual) / max(self.norm0, 1e-300)
            out.trace.append({"round": float(rnd), "decoded": float(len(out.x)), "residual": rel})
            report_every(progress, "erasure decoding", len(out.x), self.b or len(out.x), 1)
            if self.b is not None and len(out.x) >= self.b:
                break
        out.batch_size = self.b
        out.scale = None if self.b is None or self.scale is None else self.b / self.scale
        out.residual_rel = state_norm(self.residual) / max(self.norm0, 1e-300)
        out.leftover = self.propose(None)
        out.conflict = self.conflict
        return out

    def _span_round(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Solve the stalled residual in the span of its first-layer gradient and accept."""
        empty = torch.zeros(0, self.split.in_dim, dtype=self.split.first.weight.dtype)
        none = (empty, torch.zeros(0, dtype=torch.long))
        if self.span is None or self.b is None or self.scale is None:
            return none
        n = self.b - self._recovered
        g = torch.cat(
            [
                self.residual[self.split.weight_key],
                self.residual[self.split.bias_key].unsqueeze(1),
            ],
            dim=1,
        )
        state = self.span.codewords(g, n, self.propose(None).x) if n >= 1 else None
        if state is None:
            return none
        x = self.span.solve(g, state, n)
        if not bool(torch.isfinite(x).all()):
            return none
        d = self.split.deltas(x, self.labels)  # (n, C, m)
        ok_lab = torch.stack(
            [
                self.span.rank_drop(state, g, x, d[:, c], self.scale)
                for c in range(len(self.labels))
            ],
            dim=1,
        )
        ok = (ok_lab.sum(1) == 1) & self._in_range(x)
        labels = ok_lab.to(torch.int64).argmax(1)
        return x[ok], labels[ok]

    def _merge(self, x: torch.Tensor, found: torch.Tensor, mismatch: torch.Tensor) -> torch.Tensor:
        """Of certified proposals that are the same input, keep the best-fitting row's."""
        if found.numel() < 2:
            return found
        found = found[torch.argsort(mismatch[found])]
        sub = x[found]
        tol = self.settings.merge_tol * max(float(sub.abs().max()), 1.0)
        return found[~later_duplicates(sub, tol)]

    def _subtract(self, x: torch.Tensor, y: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Peel: remove the samples' full gradients; return the rows that changed."""
        xr = x.repeat_interleave(k, dim=0)
        yr = y.repeat_interleave(k, dim=0)
        g, d = sum_gradient_and_deltas(self.split, xr, yr)  # MLPs flatten their input
        b = float(self.scale or 1)
        for name, v in g.items():
            self.residual[name] -= v / b
        self._rows_cache = None
        first = k.cumsum(0) - k  # each sample's first copy
        deltas = difference_last(d[first], self.row, self.nxt).abs()
        self.mag += (deltas * k.unsqueeze(1).to(deltas.dtype)).sum(0) / b
        touched = deltas.amax(0) > 0
        return torch.nonzero(touched).squeeze(1)

    def accept(
        self, props: Proposals
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-proposal acceptance (module docstring, step 2), label, multiplicity and
        relative mismatch."""
        n = props.x.shape[0]
        none = torch.zeros(n, dtype=torch.bool)
        zeros = torch.zeros(n, dtype=torch.long)
        if n == 0 or self.scale is None:
            return none, zeros, zeros, torch.ones(n, dtype=torch.float64)
        in_range = self._in_range(props.x)
        reach, c = self._signals(props, in_range)
        _, rb = self._rows()
        target = rb[props.row].unsqueeze(1) * self.scale  # (n, 1)
        kk = torch.round(target / torch.where(c == 0, torch.ones_like(c), c))
        rel = (target - kk * c).abs() / target.abs()
        valid = (kk >= 1) & (kk <= self.settings.max_multiplicity) & (c != 0)
        # peeling leaves rounding of the order of what was subtracted from the row
        slack = 100 * self.settings.row_floor * self.mag[props.row].unsqueeze(1) * self.scale
        valid &= (target - kk * c).abs() <= self.settings.rtol * target.abs() + slack
        valid &= target.abs() > 100 * slack  # rows at the rounding level read nothing
        valid &= (kk == 1) | (props.votes >= 2).unsqueeze(1)
        unique = valid.sum(1) == 1
        ok = reach & unique & in_range
        labels = torch.where(unique, valid.to(torch.int64).argmax(1), zeros)
        mult = kk.gather(1, labels.unsqueeze(1)).squeeze(1).to(torch.long)
        mismatch = rel.gather(1, labels.unsqueeze(1)).squeeze(1).to(torch.float64)
        return ok, labels, torch.where(ok, mult, zeros), mismatch

    def _signals(
        self, props: Proposals, need: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Whether each proposal reaches its row, and its per-label row coefficient ``c``.

        With ``need`` (a mask), ``c`` is computed only for the marked proposals that reach
        their row (zero elsewhere, never read): on honest networks most proposals are mixtures
        outside the value range, and their forward passes were the decoder's main cost.
        """
        if self._cache is not None and self._cache[0] is props:
            return self._cache[1], self._cache[2]
        r, nx = self.row[props.row], self.nxt[props.row]
        has_next = (nx >= 0).to(props.x.dtype)
        nx = nx.clamp(min=0)
        if need is not None:
            w, b = self.split.first.weight.detach(), self.split.first.bias.detach()
            at_r = ((props.x * w[r]).sum(1) + b[r] > 0).to(props.x.dtype)
            at_nx = ((props.x * w[nx]).sum(1) + b[nx] > 0).to(props.x.dtype)
            reach = (at_r - has_next * at_nx) == 1
            sel = torch.nonzero(reach & need).squeeze(1)
            c = torch.zeros(props.x.shape[0], len(self.labels), dtype=props.x.dtype)
            if sel.numel():
                pre = self.rows.right(props.x[sel]) + b
                cols = torch.stack([r[sel], nx[sel]], dim=1)
                d = self.split.deltas_at(pre, self.labels, cols)
                c[sel] = d[:, :, 0] - has_next[sel].unsqueeze(1) * d[:, :, 1]
            return reach, c
        pre = self.rows.right(props.x) + self.split.first.bias.detach()
        active = (pre > 0).to(pre.dtype)
        ar = torch.arange(props.x.shape[0])
        reach = (active[ar, r] - has_next * active[ar, nx]) == 1
        deltas = self.split.deltas_at(pre, self.labels, torch.stack([r, nx], dim=1))
        c = deltas[:, :, 0] - has_next.unsqueeze(1) * deltas[:, :, 1]
        self._cache = (props, reach, c)
        return reach, c

    def _in_range(self, x: torch.Tensor) -> torch.Tensor:
        vr = self.settings.value_range
        if vr is None:
            return torch.ones(x.shape[0], dtype=torch.bool)
        lo, hi = vr
        slack = 1e-6 * (hi - lo)
        return (x >= lo - slack).all(1) & (x <= hi + slack).all(1)

    def _settle_batch_size(self, props: Proposals) -> None:
        """Infer ``B``, or a global rescaling ``s`` of the update, from rows that agree.

        A row holding one sample has ``c(x, y) / row_b = B / s`` (``s = 1`` unless the whole
        update was rescaled, e.g. by norm clipping); a row holding ``k`` near-identical
        samples gives about ``B / k``. Hence no ratio can prove a given ``B`` wrong, and:

        * ``B`` unknown: an integer ratio agreed by two proposals is taken as ``B``;
        * ``B`` given: a ratio above ``B`` (``s < 1``: clipping only shrinks) agreed by two
          *independent* proposals (inputs more than 1e-3 of their scale apart) is taken as a
          rescaling; any other ratio leaves ``s = 1`` and is recorded as a conflict.
        """
        got = self._implied_ratio(props)
        if got is None:
            return
        ratio, independent = got
        integer = abs(ratio - round(ratio)) <= self.settings.rtol * ratio and round(ratio) >= 1
        if self.given_b is None:
            if integer:
                self.b = self.scale = round(ratio)
            else:
                self.scale = ratio
        elif not abs(ratio - self.given_b) <= self.settings.rtol * ratio:
            if ratio > self.given_b and independent:
                self.scale = ratio
            else:
                self.conflict = ratio

    def _implied_ratio(self, props: Proposals) -> tuple[float, bool] | None:
        """The ratio ``c(x, y) / row_b`` most proposals agree on (to ``rtol``), and whether
        two of them are independent samples."""
        if props.x.shape[0] == 0:
            return None
        reach, c = self._signals(props)
        _, rb = self._rows()
        ratio = c / rb[props.row].unsqueeze(1)
        keep = reach.unsqueeze(1) & torch.isfinite(ratio) & (ratio >= 0.5)
        owner = torch.arange(props.x.shape[0]).unsqueeze(1).expand_as(ratio)[keep]
        v, order = torch.sort(ratio[keep])
        if v.numel() == 0:
            return None
        ends = torch.searchsorted(v, v * (1 + 2 * self.settings.rtol), right=True)
        counts = ends - torch.arange(v.numel())
        best = int(counts.argmax())
        if int(counts[best]) < min(2, props.x.shape[0]):
            return None
        members = props.x[owner[order[best : int(ends[best])]]]
        spread = float((members - members[:1]).abs().max())
        independent = spread > 1e-3 * max(float(members.abs().max()), 1e-300)
        return float(v[best : int(ends[best])].median()), independent


def default_settings(
    dtype: torch.dtype,
    *,
    rtol: float | None,
    max_rounds: int,
    max_multiplicity: int,
    value_range: tuple[float, float] | None,
) -> DecoderSettings:
    """Tolerances scaled to the update's precision (float64: 1e-9; float32: 1e-4).

    Exact single-sample rows of a clean float64 update match to about 1e-11 (peeling
    accumulates rounding), while an additive distortion of 1e-8 of the update's scale already
    exceeds 1e-9 on most rows: the default certifies clean updates and refuses distorted ones.
    """
    eps = torch.finfo(dtype).eps
    tol = rtol if rtol is not None else (1e-9 if dtype == torch.float64 else 1e-4)
    return DecoderSettings(
        rtol=tol,
        row_floor=100 * eps,
        merge_tol=1e-6 if dtype == torch.float64 else 1e-4,
        max_rounds=max_rounds,
        max_multiplicity=max_multiplicity,
        value_range=value_range,
    )
