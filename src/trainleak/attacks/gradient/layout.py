"""Reading a malicious imprint layer back from the weights (the attacker's side).

:func:`detect_layout` recovers the cumulative-bin layout that
:mod:`trainleak.systems.federated.malicious` builds, from the released weights alone;
:func:`difference_rows` and :func:`difference_last` turn cumulative bins into single bins.

References:
    Fowl, Geiping, Czaja, Goldblum, Goldstein, *Robbing the Fed: Directly Obtaining Private
    Data in Federated Learning with Modified Models*, ICLR 2022, Sec. 3.
"""

from __future__ import annotations

import math

import torch

from trainleak.errors import ConfigError
from trainleak.releases.federated import ImprintLayout


def difference_rows(g: torch.Tensor, row: torch.Tensor, nxt: torch.Tensor) -> torch.Tensor:
    """Apply the bin transform along axis 0 (neurons) of a gradient ``(m,)`` or ``(m, d)``.

    Row ``r`` of the result is ``g[row[r]] - g[nxt[r]]`` (or ``g[row[r]]`` when ``nxt[r]``
    is -1): consecutive cumulative bins become single bins.
    """
    base = g[row]
    mask = (nxt >= 0).to(g.dtype).reshape(-1, *([1] * (g.ndim - 1)))
    return base - mask * g[nxt.clamp(min=0)]


def difference_last(a: torch.Tensor, row: torch.Tensor, nxt: torch.Tensor) -> torch.Tensor:
    """The bin transform along the last axis (per-sample neuron vectors ``(..., m)``)."""
    return a[..., row] - (nxt >= 0).to(a.dtype) * a[..., nxt.clamp(min=0)]


def detect_layout(
    weight: torch.Tensor, bias: torch.Tensor, next_weight: torch.Tensor
) -> ImprintLayout:
    """Recover the bin layout from the weights alone (no server secrets needed).

    Rows with the same direction form a group; within a group neurons are sorted by threshold
    ``-b / |w|``. A group is usable only if the next layer's columns are equal inside it.

    Args:
        weight: first-layer weight ``(m, d)``.
        bias: first-layer bias ``(m,)``.
        next_weight: the next layer's weight ``(h, m)``.

    Returns:
        The layout.

    Raises:
        ConfigError: no two rows share a direction (an honest layer), or the next layer does
            not give a group equal outgoing weights.
    """
    w = weight.to(torch.float64)
    norms = w.norm(dim=1, keepdim=True).clamp_min(1e-300)
    key = torch.round((w / norms) * 1e9)
    _, inverse = torch.unique(key, dim=0, return_inverse=True)
    thresholds = -bias.to(torch.float64) / norms.squeeze(1)
    groups, ts = [], []
    for gid in torch.unique(inverse):
        idx = torch.nonzero(inverse == gid).squeeze(1)
        order = torch.argsort(thresholds[idx])
        idx = idx[order]
        groups.append(idx)
        ts.append(thresholds[idx])
    layout = ImprintLayout(tuple(groups), tuple(ts))
    if layout.n_imprint_groups == 0:
        raise ConfigError.invalid(
            "release.parameters['layers.0.weight']",
            "a malicious imprint layer (groups of rows sharing one direction; see "
            "trainleak.systems.federated.malicious_mlp)",
            "an honest first layer: no two rows share a direction",
        )
    _check_outgoing(layout, next_weight.to(torch.float64))
    return layout


def _check_outgoing(layout: ImprintLayout, nxt: torch.Tensor) -> None:
    scale = float(nxt.abs().max()) or 1.0
    for g in layout.groups:
        if g.numel() < 2:
            continue
        cols = nxt[:, g]
        spread = float((cols - cols[:, :1]).abs().max())
        if spread > 1e-9 * scale * math.sqrt(nxt.shape[0]):
            raise ConfigError.invalid(
                "release.parameters['layers.1.weight']",
                "equal outgoing weights within each imprint group",
                f"a spread of {spread:.3g} inside a group of {g.numel()} neurons",
            )
