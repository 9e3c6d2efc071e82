"""Recover deleted records from an exact-unlearning server's broadcasts (seed system 6).

A malicious client probes the server with known changes, identifies the hidden statistics
``(A, B)`` from the broadcast heads (the rank condition ``rank(D) = d``), and inverts every
isolated deletion by another client from the rank-one footprint
``A_t W_{t+1} - B_t = phi (phi^T W_{t+1} - y^T)``: features up to float precision, and the
label. See :mod:`trainleak.attacks.unlearning.identify` for the algebra.

References:
    Seed system 6 (trainleak's seed briefs, section 6); server of Quan, Wu, Montana, arXiv
    2603.12977; model-difference inversion after unlearning as in FUIA, arXiv 2502.14558.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.unlearning.identify import recover_deletion
from trainleak.attacks.unlearning.probing import identify_before
from trainleak.errors import ShapeError
from trainleak.progress import Progress, report_every
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.unlearning import BroadcastLog
from trainleak.validation import param


@register_attack
@dataclass(frozen=True, kw_only=True)
class BroadcastDeletionAttack(Attack[BroadcastLog]):
    """Invert every foreign deletion in a broadcast log from the client's own probes.

    Args:
        prior_lam: prior ``A ~ prior_lam I`` in directions the probes do not reach (the
            server's public ridge regulariser; 0 means no prior).
        certify_tol: certify a candidate when the state was identified (full rank) and the
            footprint's ``sigma_2 / sigma_1`` is below this.

    Example:
        >>> # a tiny release: see tests/release_fixtures.py
        >>> log, truth = tiny_broadcast_log()  # doctest: +SKIP
        >>> rec = BroadcastDeletionAttack()(log)  # doctest: +SKIP
        >>> rec.labels.tolist() == [label for _, label in truth]  # doctest: +SKIP
        True
    """

    name: ClassVar[str] = "unlearning-broadcast"
    summary: ClassVar[str] = (
        "identify an exact-unlearning ridge server's statistics from own probes and invert "
        "each isolated deletion (features and label)"
    )
    release_type: ClassVar[type[BroadcastLog]] = BroadcastLog
    requires: ClassVar[frozenset[str]] = frozenset()

    prior_lam: float = param(0.0, ge=0)
    certify_tol: float = param(1e-6, gt=0, lt=1)

    def run(
        self,
        release: BroadcastLog,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        targets = release.deletions()
        if not targets:
            raise ShapeError("the broadcast log holds no foreign deletion to invert")
        phis, labels, ranks, ratios, residuals = [], [], [], [], []
        heads = release.heads.numpy()
        for n, t in enumerate(targets):
            state = identify_before(release, t, prior_lam=self.prior_lam)
            rec = recover_deletion(state.A, state.B, heads[t])
            phis.append(rec.phi)
            labels.append(rec.label)
            ranks.append(state.rank)
            ratios.append(rec.rank_one_ratio)
            residuals.append(state.residual)
            report_every(progress, "invert deletions", n + 1, len(targets), 10)
        ranks_a, ratios_a = np.array(ranks), np.array(ratios)
        certified = (ranks_a == release.dim) & (ratios_a < self.certify_tol)
        return Reconstruction(
            inputs=torch.from_numpy(np.stack(phis)),
            labels=torch.tensor(labels),
            scores=torch.from_numpy(-np.log10(np.maximum(ratios_a, 1e-300))),
            certified=torch.from_numpy(certified),
            diagnostics={
                "targets": targets,
                "rank": ranks,
                "dim": release.dim,
                "rank_one_ratio": ratios,
                "identification_residual": residuals,
            },
        )

    def expected_shape(self, release: BroadcastLog, knowledge: Knowledge) -> tuple[int, ...]:
        return (release.dim,)
