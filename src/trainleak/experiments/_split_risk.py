"""The risk card of ``split-learning-kdufsl``: the (data set, defense setting) whose smashed-data
transcript lets an attack reconstruct the most client images, beyond the auxiliary-mean image.

The rows carry the mean SSIM over the ``n`` attacked images, not each image's SSIM, so the
count is the smallest one that mean allows: SSIM is at most 1, hence at least
``n (mean - t) / (1 - t)`` images reach SSIM ``t`` (:data:`SSIM_RULE`). The auxiliary-mean
baseline (the same images, the same matching) is counted by the same rule, so both sides are
read alike; a finer per-image count needs per-image SSIM in the rows. The DP accountant's
epsilon of the smashed channel is a guarantee, but on another scale than reconstruction
success and for one channel only, so it enters with ``general=False`` and never clears a
setting.

Zaland, Mistry and Bhuyan, arXiv 2602.17614, 2026 (KD-UFSL).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from trainleak.experiments.risk import (
    AttackFinding,
    BoundFinding,
    Release,
    RiskCard,
    riskiest_card,
    scored_finding,
)
from trainleak.experiments.split_learning_kdufsl_claims import AttackRow, UtilityRow

SSIM_RULE = 0.5
"""SSIM at or above which a reconstructed image counts as recovered."""


def guaranteed_count(mean_ssim: float, n: int, threshold: float = SSIM_RULE) -> int:
    """The fewest of ``n`` images at SSIM >= ``threshold`` given their mean SSIM (each SSIM at
    most 1): ``ceil(n (mean - t) / (1 - t))``, at least 0; NaN counts 0."""
    if math.isnan(mean_ssim) or mean_ssim <= threshold:
        return 0
    return min(n, math.ceil(n * (mean_ssim - threshold) / (1 - threshold) - 1e-9))


def _finding(r: AttackRow) -> AttackFinding:
    return scored_finding(
        f"{r.attack}{' (adaptive)' if r.adaptive else ''}",
        guaranteed_count(r.ssim, r.n),
        r.n,
        rule=f"images at SSIM >= {SSIM_RULE:g} (the fewest that the mean SSIM allows)",
        baseline=guaranteed_count(r.baseline_ssim, r.n),
        quality=r.ssim,
        error=r.mse,
        detail=f"mean SSIM {r.ssim:.3g} and MSE {r.mse:.3g}; baseline: the auxiliary-mean "
        f"image, mean SSIM {r.baseline_ssim:.3g} and MSE {r.baseline_mse:.3g}",
    )


def _bound(u: UtilityRow | None, delta: float) -> list[BoundFinding]:
    """The accountant's epsilon of the setting's DP noise (none without DP)."""
    if u is None or math.isnan(u.epsilon):
        return []
    return [
        BoundFinding(
            "DP accountant of the smashed channel",
            u.epsilon,
            f"epsilon of (epsilon, {delta:g})-DP (replace-one), not a reconstruction error",
            "upper",
            f"the transmitted smashed data are ({u.epsilon:.3g}, {delta:g})-DP with respect to "
            "replacing one client record",
            f"clipping and noise sigma {u.sigma:g} on every transmission, the smashed channel "
            "only (not the labels or the returned gradients)",
            general=False,
        )
    ]


def risk_of(rows: Sequence[Any], cfg: Any) -> RiskCard:
    """The card of the setting whose transcript an attack inverts the most beyond the
    auxiliary-mean image, with the setting's DP epsilon where it has one."""
    util = {(r.dataset, r.setting): r for r in rows if isinstance(r, UtilityRow)}
    releases: dict[str, Release] = {}
    for r in rows:
        if not isinstance(r, AttackRow):
            continue
        name = f"the UFSL smashed-data transcript of {r.dataset}, setting {r.setting}"
        found = [*releases.get(name, ([], []))[0], _finding(r)]
        releases[name] = (found, _bound(util.get((r.dataset, r.setting)), cfg.delta))
    return riskiest_card(releases)
