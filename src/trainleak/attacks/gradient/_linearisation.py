"""Each recovered sample's network frozen at its activation pattern (the certificate's model).

Inside the region where no ReLU of the network changes state, a fully connected ReLU network
is affine in its input: the logits are ``z = M x + const`` and the gradient of the
cross-entropy with respect to the first-layer pre-activation is ``delta(x, y) = Q^T (p(z) -
e_y)``, with ``Q`` (``C x m``) the masked product of the layers above the first one (the first
layer's mask included) and ``M = Q W1``. Everything the certificate needs follows:

* the coefficient of sample ``i`` in (transformed) first-layer row ``r``:
  ``c_ir(x, y) = q_ir . (p(x) - e_y)``, where ``q_ir`` is column ``r`` of ``T Q_i^T``;
* its Lipschitz constant in ``x`` on the region: ``|c_ir(x) - c_ir(x')| <= 1/2 ||q_ir||
  ||M_i|| ||x - x'||`` (the softmax Jacobian has spectral norm at most 1/2, by Gershgorin:
  row ``k`` of ``diag(p) - p p^T`` sums in absolute value to ``2 p_k (1 - p_k) <= 1/2``);
* a label change moves ``c_ir`` by ``q_ir,y - q_ir,y'``, a constant on the region;
* the region contains the l2 ball of radius ``radius_i`` around ``x_i``: the smallest distance
  from ``x_i`` to a first-layer hyperplane, and for deeper units ``|z| / ||grad z||`` with the
  gradient norm bounded by ``||row of W_l A ... A_1|| ||W_1||_2``.

References:
    Montufar, Pascanu, Cho, Bengio, *On the Number of Linear Regions of Deep Neural
    Networks*, NeurIPS 2014 (piecewise-affine ReLU networks). Gao, Pavel, *On the Properties
    of the Softmax Function*, arXiv 1704.00805, 2017 (Lipschitz constants of the softmax).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

import torch
from torch import nn

from trainleak.attacks.gradient._linearisation_factored import factor_columns
from trainleak.attacks.gradient.layout import difference_last
from trainleak.linalg import RowGroups
from trainleak.models.functional import FirstLayerSplit


@dataclass(frozen=True)
class Linearisation:
    """The recovered samples' networks, each frozen at its own activation pattern.

    Attributes:
        x: the samples ``(n, d)``.
        labels: their labels ``(n,)``.
        probs: softmax outputs ``(n, C)``.
        q: transformed backprop matrices ``(n, C, m')``: ``c_ir(x, y) = q[i, :, r] . (p - e_y)``.
        absolute: ``|q|^T |p - e_y|`` per (sample, row), with ``|q|`` the backprop product taken
            over absolute values (the scale of the coefficient's rounding error), ``(n, m')``.
        m_mat: logits Jacobians ``M_i`` ``(n, C, d)``.
        m_norm: their spectral norms ``(n,)``.
        jpm: ``Jp(x_i) M_i`` (``Jp`` the softmax Jacobian): ``grad_x c_ir = jpm_i^T q_ir``.
        grad_norm: ``||grad_x c_ir||`` at the samples, ``(n, m')``.
        radius: l2 radius of a ball around each sample on which no ReLU changes state.
    """

    x: torch.Tensor
    labels: torch.Tensor
    probs: torch.Tensor
    q: torch.Tensor
    absolute: torch.Tensor
    m_mat: torch.Tensor
    m_norm: torch.Tensor
    jpm: torch.Tensor
    grad_norm: torch.Tensor
    radius: torch.Tensor
    known_norms: torch.Tensor | None = None
    known_coefficients: torch.Tensor | None = None

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @cached_property
    def q_norm(self) -> torch.Tensor:
        """``||q_ir||`` over the classes, ``(n, m')`` (computed once)."""
        if self.known_norms is not None:
            return self.known_norms
        return (self.q * self.q).sum(1).sqrt()

    @cached_property
    def own_coefficients(self) -> torch.Tensor:
        """``c_ir`` under the samples' own labels, ``(n, m')`` (computed once; read-only)."""
        if self.known_coefficients is not None:
            return self.known_coefficients
        return self.coefficients_under(self.labels)

    @property
    def xt_norm(self) -> torch.Tensor:
        """``||(x_i, 1)||`` for every sample."""
        return torch.sqrt(1 + (self.x**2).sum(1))

    def coefficients(self, labels: torch.Tensor | None = None) -> torch.Tensor:
        """``c_ir`` at the samples under ``labels`` (default: their own), ``(n, m')``."""
        return self.own_coefficients if labels is None else self.coefficients_under(labels)

    def coefficients_under(self, labels: torch.Tensor) -> torch.Tensor:
        """``c_ir`` at the samples under ``labels``, ``(n, m')``."""
        onehot = torch.nn.functional.one_hot(labels, self.probs.shape[1]).to(self.probs.dtype)
        return torch.einsum("icr,ic->ir", self.q, self.probs - onehot)

    def curvature(self) -> torch.Tensor:
        """Bound of the second derivative of ``c_ir`` on the region: ``3/2 ||q_ir|| ||M_i||^2``
        ``(n, m')``."""
        return 1.5 * self.q_norm * (self.m_norm**2).unsqueeze(1)

    def lipschitz(self, t: torch.Tensor | float | None = None) -> torch.Tensor:
        """Per (sample, row) Lipschitz constant of ``c_ir`` on the region, ``(n, m')``.

        With ``t`` (per sample or scalar), the constant on the ball of radius ``t``: the
        gradient's norm at the sample plus ``3/2 ||q_ir|| ||M_i||^2 t``, since the softmax
        Jacobian moves by at most ``3/2 ||dz||`` (its derivative along ``u`` is ``diag(a) - a
        p^T - p a^T`` with ``||a|| = ||Jp u|| <= ||u|| / 2``). Without ``t``: ``||q_ir||
        ||M_i|| / 2`` (the whole region).
        """
        region = 0.5 * self.q_norm * self.m_norm.unsqueeze(1)
        if t is None:
            return region
        tt = torch.as_tensor(t, dtype=self.x.dtype).reshape(-1, 1)
        local = self.grad_norm + self.curvature() * tt
        return torch.minimum(local, region)

    def subset(self, idx: torch.Tensor) -> Linearisation:
        """The samples ``idx`` only."""
        parts: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            parts[f.name] = None if v is None else v[idx]
        return Linearisation(**parts)


def _linear_layers(split: FirstLayerSplit) -> list[nn.Linear]:
    layers = [layer for layer in split.model.layers if isinstance(layer, nn.Linear)]
    return layers


def _forward(
    layers: list[nn.Linear], x: torch.Tensor, rows: RowGroups
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Hidden pre-activations (every layer but the last) and the softmax output; the first
    layer through its distinct rows."""
    pres = []
    h = x
    with torch.no_grad():
        for i, layer in enumerate(layers[:-1]):
            bias = layer.bias
            z = layer(h) if i or bias is None else rows.right(h) + bias.detach()
            pres.append(z)
            h = torch.relu(z)
        probs = torch.softmax(layers[-1](h), dim=1)
    return pres, probs


def _backprop(
    layers: list[nn.Linear], masks: list[torch.Tensor], cols: torch.Tensor
) -> torch.Tensor:
    """``Q = W_L A_{L-1} ... W_2 A_1`` per sample at the first-layer neurons ``cols``,
    ``(n, C, len(cols))``."""
    n = masks[0].shape[0]
    ws = [layer.weight.detach() for layer in layers]
    ws[1] = ws[1][:, cols]
    q = ws[-1].expand(n, *ws[-1].shape)
    for l in range(len(layers) - 2, 0, -1):
        q = (q * masks[l].unsqueeze(1)) @ ws[l]
    return q * masks[0][:, cols].unsqueeze(1)


def _transformed(
    layers: list[nn.Linear], masks: list[torch.Tensor], transform: tuple[torch.Tensor, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Q at the neurons row, Q after the row transform)``. When every ``next`` is the
    following ``row`` (cumulative bins in order, or no transform), the transform is a shifted
    difference of the first, with no gather over the ``(n, C, m)`` product."""
    row, nxt = transform
    has = nxt >= 0
    q = _backprop(layers, masks, row)
    if bool(((nxt[:-1] == row[1:]) | ~has[:-1]).all()) and not bool(has[-1]):
        return q, q - has.to(q.dtype) * torch.roll(q, -1, dims=-1)
    full = _backprop(layers, masks, torch.arange(masks[0].shape[1]))
    return q, difference_last(full, row, nxt)


def _absolute(
    layers: list[nn.Linear], masks: list[torch.Tensor], weights: torch.Tensor
) -> torch.Tensor:
    """``weights_i^T |W_L| A_{L-1} ... |W_2| A_1`` per sample, ``(n, m)``: the product over
    absolute values contracted with ``weights`` (``(n, C)``) before it is formed."""
    v = weights @ layers[-1].weight.detach().abs()
    for l in range(len(layers) - 2, 0, -1):
        v = (v * masks[l]) @ layers[l].weight.detach().abs()
    return v * masks[0]


def _radius(layers: list[nn.Linear], pres: list[torch.Tensor], rows: RowGroups) -> torch.Tensor:
    """Lower bound of the distance to the nearest activation change, per sample."""
    w1 = layers[0].weight.detach()
    radius = (pres[0].abs() / w1.norm(dim=1).clamp_min(1e-300)).amin(1)
    if len(pres) == 1:
        return radius
    w1_norm = rows.spectral_norm()
    masks = [(z > 0).to(z.dtype) for z in pres]
    w2 = layers[1].weight.detach()
    # ||row j of W_2 A_1|| for every sample, without forming W_2 A_1
    grad = (masks[0] @ (w2 * w2).T).clamp_min(0).sqrt() * w1_norm
    radius = torch.minimum(radius, (pres[1].abs() / grad.clamp_min(1e-300)).amin(1))
    if len(pres) == 2:
        return radius
    path = w2.unsqueeze(0) * masks[0].unsqueeze(1)  # (n, n_2, m)
    for l in range(1, len(pres)):
        if l > 1:
            grad = path.norm(dim=2) * w1_norm  # bound of ||d z_l / d x|| per unit
            radius = torch.minimum(radius, (pres[l].abs() / grad.clamp_min(1e-300)).amin(1))
        if l + 1 < len(pres):
            path = layers[l + 1].weight.detach() @ (path * masks[l].unsqueeze(2))
    return radius


def linearise(
    split: FirstLayerSplit,
    x: torch.Tensor,
    labels: torch.Tensor,
    transform: tuple[torch.Tensor, torch.Tensor],
) -> Linearisation:
    """Freeze the network at each sample's activation pattern.

    Args:
        split: the model seen at its first layer.
        x: flattened samples ``(n, d)`` in the model's dtype.
        labels: their labels ``(n,)``.
        transform: the row transform ``(row, next)`` of the decoder.

    Returns:
        The :class:`Linearisation` (rows already transformed).
    """
    layers = _linear_layers(split)
    rows = RowGroups(layers[0].weight.detach())
    pres, probs = _forward(layers, x, rows)
    masks = [(z > 0).to(x.dtype) for z in pres]
    row, nxt = transform
    onehot = torch.nn.functional.one_hot(labels, probs.shape[1]).to(x.dtype)
    jp = torch.diag_embed(probs) - probs.unsqueeze(2) * probs.unsqueeze(1)
    fac = factor_columns(layers, masks, transform, rows)
    known: dict[str, torch.Tensor] = {}
    if fac is None:
        q, qt = _transformed(layers, masks, transform)
        coef, basis = rows.factor(q, row)
    else:
        qt, coef, basis = fac.q(), fac.merged, rows.unique_rows()
    m_mat = coef @ basis
    if coef.shape[-1] < basis.shape[-1]:  # few distinct first-layer rows: Gram products small
        small, bb = jp @ coef, basis @ basis.T
        jm = small @ basis
        gram, mm = small @ bb @ small.transpose(1, 2), coef @ bb @ coef.transpose(1, 2)
    else:
        jm = jp @ m_mat
        gram, mm = jm @ jm.transpose(1, 2), m_mat @ m_mat.transpose(1, 2)
    # gram (n, C, C): ||grad c_ir||^2 = q_ir^T Jp M M^T Jp q_ir
    if fac is None:
        grad_norm = ((gram @ qt) * qt).sum(1).clamp_min(0).sqrt()
    else:
        grad_norm, known = fac.norms(gram), fac.known(probs - onehot)
    absolute = _absolute(layers, masks, (probs - onehot).abs())
    has = (nxt >= 0).to(x.dtype)
    return Linearisation(
        x=x,
        labels=labels,
        probs=probs,
        q=qt,
        absolute=absolute[:, row] + has * absolute[:, nxt.clamp(min=0)],
        m_mat=m_mat,
        m_norm=torch.linalg.eigvalsh(mm)[:, -1].clamp_min(0).sqrt(),
        jpm=jm,
        grad_norm=grad_norm,
        radius=_radius(layers, pres, rows),
        known_norms=known.get("norms"),
        known_coefficients=known.get("coefficients"),
    )
