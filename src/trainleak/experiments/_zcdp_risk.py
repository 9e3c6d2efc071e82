"""The risk card of ``zcdp-transition``: the riskiest (setting, d, rho) point of its sweeps.

Kept apart from :mod:`.zcdp_transition` (which is near the file-size limit); the rows are
that module's ``TransitionRow``: ``trials`` records attacked, ``recovered`` of them within
:data:`PRACTICAL`, the mean error and cosine, and the zCDP bound where one applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainleak.experiments.risk import (
    BoundFinding,
    Release,
    RiskCard,
    riskiest_card,
    scored_finding,
)

PRACTICAL = 0.2
"""Normalised error ||x_hat - x||^2 / ||x||^2 at or below which a record counts as recovered
(the level of the experiment's 'practical' claim)."""

RULE = f"normalised error ||x_hat - x||^2 / ||x||^2 <= {PRACTICAL} (a unit-norm record)"


def _bound(r: Any) -> list[BoundFinding]:
    """The Donsker-Varadhan bound at the row's rho (none for digits: the prior is not uniform)."""
    if r.bound is None:
        return []
    dim = r.d if r.rho_over_s is None else round(r.rho / r.rho_over_s)
    return [
        BoundFinding(
            "zCDP entropy bound (uniform prior on the sphere)",
            r.bound,
            "expected normalised squared error ||x_hat - x||^2 / ||x||^2",
            "lower",
            f"every attack's expected normalised error is at least {r.bound:.3g}",
            f"records uniform on the unit sphere of a known {dim}-dimensional space and a "
            f"{r.rho:.3g}-zCDP release",
        )
    ]


def risk_of(rows: Sequence[Any], cfg: Any) -> RiskCard:
    """The card of the (setting, d, rho) point where the informed attack recovered the most
    records within :data:`PRACTICAL`, with the zCDP bound at that rho."""
    releases: dict[str, Release] = {}
    for r in rows:
        found = scored_finding(
            f"informed ridge attack ({r.setting})",
            r.recovered,
            r.trials,
            rule=RULE,
            detail=f"mean error {r.mse:.3g}, mean cosine {r.cos:.3g}",
        )
        name = (
            f"rho-zCDP ridge regression by output perturbation ({r.setting}, d = {r.d}, "
            f"rho = {r.rho:.3g}), one release per attacked record"
        )
        releases[name] = ([found], _bound(r))
    return riskiest_card(releases)
