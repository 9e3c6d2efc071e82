"""Privacy accounting for the DP part of KD-UFSL: the per-record Gaussian mechanism on the
smashed data (or the inputs), composed over every time a record is transmitted.

Each transmission of a record is ``clip_C(v) + N(0, sigma^2 C^2 I)``: its sensitivity is ``C``
under add/remove neighbours and ``2C`` under replace-one, so one transmission is
``(alpha, alpha * D^2 / (2 sigma^2))``-RDP with ``D = 1`` or ``2`` (in units of ``C``), and
``T`` transmissions (rounds x local epochs: every record is sent once per epoch, batches are
a shuffle, not Poisson sampling, so no amplification is claimed) compose additively. The
(epsilon, delta) guarantee is the best conversion over a dense grid of orders:
``epsilon = min_alpha T * alpha * D^2 / (2 sigma^2) + log(1/delta) / (alpha - 1)``.

MDAV afterwards is post-processing of the noised batch for this channel. What the accountant
does not cover: the gradients the client's tail returns (they carry the labels), and the
aggregated client weights (trained on the records); see ``docs/decisions.md``.

References:
    Mironov, "Renyi Differential Privacy", CSF 2017 (Gaussian RDP, composition, conversion).
    Bun and Steinke, "Concentrated Differential Privacy", TCC 2016 (the closed form
    ``rho + 2 sqrt(rho log(1/delta))`` for ``rho``-zCDP, which the grid reaches from above).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from trainleak.errors import ConfigError
from trainleak.validation import check_in_range, check_positive

Neighbour = Literal["add_remove", "replace"]


@dataclass(frozen=True)
class SmashedDPGuarantee:
    """An (epsilon, delta) guarantee of the smashed-data channel.

    Attributes:
        epsilon, delta: the guarantee.
        rho: the zCDP parameter ``T * D^2 / (2 sigma^2)`` of the composed mechanism.
        order: the Renyi order that achieved ``epsilon``.
        sigma, transmissions, neighbour: the inputs.
    """

    epsilon: float
    delta: float
    rho: float
    order: float
    sigma: float
    transmissions: int
    neighbour: Neighbour


_ORDERS = np.concatenate([1.0 + np.geomspace(1e-4, 9.0, 4000), np.geomspace(10.0, 1e6, 4000)])


def smashed_dp_epsilon(
    sigma: float, transmissions: int, delta: float, neighbour: Neighbour = "replace"
) -> SmashedDPGuarantee:
    """The (epsilon, delta) of ``transmissions`` Gaussian releases of a clipped record.

    Args:
        sigma: the noise multiplier (noise std over the clipping norm), > 0.
        transmissions: how often each record is sent (rounds x local epochs), >= 1.
        delta: in (0, 1).
        neighbour: ``"replace"`` (sensitivity 2C) or ``"add_remove"`` (sensitivity C).

    Raises:
        ConfigError: a non-positive sigma, fewer than one transmission, delta outside (0, 1)
            or an unknown neighbour relation.
    """
    check_positive("sigma", sigma)
    check_in_range("delta", delta, 0.0, 1.0, closed="()")
    if isinstance(transmissions, bool) or not isinstance(transmissions, int) or transmissions < 1:
        raise ConfigError.invalid("transmissions", "an integer >= 1", transmissions)
    if neighbour not in ("replace", "add_remove"):
        raise ConfigError.invalid("neighbour", "'replace' or 'add_remove'", neighbour)
    sens = 2.0 if neighbour == "replace" else 1.0
    rho = transmissions * sens**2 / (2.0 * sigma**2)
    eps = rho * _ORDERS + math.log(1.0 / delta) / (_ORDERS - 1.0)
    i = int(np.argmin(eps))
    return SmashedDPGuarantee(
        float(eps[i]), float(delta), rho, float(_ORDERS[i]), float(sigma), transmissions, neighbour
    )
