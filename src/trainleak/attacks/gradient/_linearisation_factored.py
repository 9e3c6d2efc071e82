"""The backprop product of a malicious imprint layer, kept in factored form.

Through a cumulative-bin imprint layer (:func:`trainleak.systems.federated.malicious_mlp`) the
first layer repeats one weight row per group and the next layer gives every neuron of a group
the same outgoing column. Column ``r`` of sample ``i``'s backprop product is then
``Q_i[:, r] = V_i b_{k(r)} a_ir``: ``V_i`` the product of the layers above the second (``C x
n_2``), ``b_k`` one of the few distinct outgoing columns, ``a_ir`` the neuron's 0/1 state; and
after the bin transform, ``q_ir = V_i b_{k(r)} s_ir`` with ``s_ir = a_{i,row r} - a_{i,next
r}``. Norms, coefficients and gradient norms of every ``q_ir`` follow from the ``C x K``
products ``V_i b_k`` alone, and ``Q_i W_1`` from ``V_i`` times a ``K x G`` count matrix times
the ``G`` distinct first-layer rows, without forming any ``(n, C, m)`` product but ``q``
itself. The identities are exact; only the floating-point order of the sums differs from the
direct products (the certificate's tests compare both).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from trainleak.linalg import RowGroups


@dataclass(frozen=True)
class FactoredColumns:
    """``q_ir = vk[i, :, kind[r]] * scale[i, r]`` and the merged product for ``Q_i W_1``."""

    vk: torch.Tensor  # (n, C, K): V_i b_k
    kind: torch.Tensor  # (m',): distinct outgoing column of each transformed row
    scale: torch.Tensor  # (n, m'): s_ir
    merged: torch.Tensor  # (n, C, G): Q_i W_1 = merged_i @ (distinct first-layer rows)

    def q(self) -> torch.Tensor:
        """The transformed backprop product ``(n, C, m')``, as one batched product with the
        (one non-zero per column) ``(n, K, m')`` spread of ``scale``: each entry is the single
        product ``vk * scale`` plus exact zeros."""
        pick = torch.nn.functional.one_hot(self.kind, self.vk.shape[2]).T.to(self.vk.dtype)
        return self.vk @ (pick.unsqueeze(0) * self.scale.unsqueeze(1))

    def norms(self, gram: torch.Tensor) -> torch.Tensor:
        """``||grad c_ir|| = sqrt(q_ir^T gram_i q_ir)`` for per-sample ``gram`` ``(n, C, C)``."""
        g = ((gram @ self.vk) * self.vk).sum(1).clamp_min(0).sqrt()  # (n, K)
        return g[:, self.kind] * self.scale.abs()

    def known(self, residual: torch.Tensor) -> dict[str, torch.Tensor]:
        """``||q_ir||`` and ``c_ir = q_ir . residual_i`` (``residual = p - e_y``, ``(n, C)``)."""
        norms = (self.vk * self.vk).sum(1).sqrt()[:, self.kind] * self.scale.abs()
        coef = (self.vk * residual.unsqueeze(2)).sum(1)[:, self.kind] * self.scale
        return {"norms": norms, "coefficients": coef}


def factor_columns(
    layers: list[nn.Linear],
    masks: list[torch.Tensor],
    transform: tuple[torch.Tensor, torch.Tensor],
    rows: RowGroups,
) -> FactoredColumns | None:
    """The factored product when the layout allows it (repeated first-layer rows, equal
    outgoing columns inside every transformed pair, a hidden layer above), else ``None``."""
    if len(layers) < 3 or rows.unique is None:
        return None
    row, nxt = transform
    has = nxt >= 0
    w2 = layers[1].weight.detach()
    if not torch.equal(w2[:, row[has]], w2[:, nxt[has]]):
        return None
    cols = RowGroups(w2.T)
    if cols.unique is None:
        return None
    n = masks[0].shape[0]
    v = layers[-1].weight.detach().expand(n, *layers[-1].weight.shape)
    for l in range(len(layers) - 2, 1, -1):
        v = (v * masks[l].unsqueeze(1)) @ layers[l].weight.detach()
    v = v * masks[1].unsqueeze(1)  # (n, C, n_2)
    vk = v @ cols.unique.T  # (n, C, K)
    a = masks[0]
    scale = a[:, row] - has.to(a.dtype) * a[:, nxt.clamp(min=0)]
    n_groups = int(rows.unique.shape[0])
    counts = torch.zeros(n, int(cols.unique.shape[0]) * n_groups, dtype=a.dtype)
    counts.index_add_(1, cols.inverse * n_groups + rows.inverse, a)
    merged = vk @ counts.reshape(n, -1, n_groups)  # (n, C, G)
    return FactoredColumns(vk, cols.inverse[row], scale, merged)
