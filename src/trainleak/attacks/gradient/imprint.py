"""Robbing the Fed: read a malicious imprint layer's bins without peeling.

Every bin (the difference of consecutive cumulative-bin rows) with a non-zero bias entry gives
one candidate ``x = dW_bin / db_bin``: the exact input when the bin holds one sample, the
gradient-weighted mean of its samples otherwise. Nothing is certified and nothing is
subtracted: this is the single-round analytic read-out of Fowl et al., the yardstick the
erasure decoder is measured against (same number of first-layer neurons, one group).

References:
    Fowl, Geiping, Czaja, Goldblum, Goldstein, *Robbing the Fed: Directly Obtaining Private
    Data in Federated Learning with Modified Models*, ICLR 2022, Sec. 3 and Eq. (2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Reconstruction, register_attack
from trainleak.attacks.gradient._common import (
    FedSGDAttack,
    check_flat_dim,
    input_shape,
    require_fedsgd,
)
from trainleak.attacks.gradient.layout import detect_layout, difference_rows
from trainleak.models.functional import FirstLayerSplit
from trainleak.progress import Progress
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param


@register_attack
@dataclass(frozen=True, kw_only=True)
class ImprintAttack(FedSGDAttack):
    """Analytic read-out of cumulative imprint bins (Robbing the Fed).

    Args:
        min_relative_signal: bins whose bias entry is below this fraction of the largest are
            treated as empty.

    Example:
        >>> # a tiny release: see tests/release_fixtures.py
        >>> upd, kn = tiny_malicious_update()  # doctest: +SKIP
        >>> len(ImprintAttack()(upd, kn)) > 0  # doctest: +SKIP
        True
    """

    name: ClassVar[str] = "imprint"
    summary: ClassVar[str] = (
        "Robbing the Fed: x = dW/db on each cumulative imprint bin of a malicious first layer"
    )
    release_type: ClassVar[type[GradientUpdate]] = GradientUpdate
    requires: ClassVar[frozenset[str]] = frozenset({"active"})

    min_relative_signal: float = param(1e-12, ge=0, lt=1)

    def run(
        self,
        release: GradientUpdate,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        require_fedsgd(release, "ImprintAttack")
        shape = input_shape(release, knowledge)
        check_flat_dim(release, shape)
        p, u = release.parameters, release.update
        for key in ("layers.0.weight", "layers.0.bias", "layers.1.weight"):
            if key not in p:
                raise FirstLayerSplit.missing(key, release.architecture.kind)
        layout = detect_layout(p["layers.0.weight"], p["layers.0.bias"], p["layers.1.weight"])
        row, nxt = layout.difference_index()
        rw = difference_rows(u["layers.0.weight"], row, nxt)
        rb = difference_rows(u["layers.0.bias"], row, nxt)
        live = rb.abs() > self.min_relative_signal * float(rb.abs().max())
        x = rw[live] / rb[live].unsqueeze(1)
        return Reconstruction(
            inputs=x.reshape(x.shape[0], *shape),
            scores=rb[live].abs(),
            diagnostics={"n_bins": int(row.numel()), "n_nonempty_bins": int(live.sum())},
        )
