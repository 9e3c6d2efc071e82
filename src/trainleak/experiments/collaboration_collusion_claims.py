"""Rows and claims of ``collaboration-collusion`` (seed 7): pure functions of the measurements.

Each claim is ``claim_fn(rows, config) -> Claim``; the per-data-set claims are bound to a data
set with :func:`functools.partial`. The unit tests feed them rows where they must hold and rows
where they must fail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from pydantic import Field

from trainleak.experiments.base import Claim, ClaimFn, ExperimentConfig, claim, not_tested
from trainleak.experiments.risk import (
    AttackFinding,
    Release,
    RiskCard,
    riskiest_card,
    scored_finding,
    share_count,
)


class CollusionConfig(ExperimentConfig):
    """Config of ``collaboration-collusion`` (linear algebra; about a minute)."""

    parties: int = Field(4, ge=2)
    anchor_rows: int = Field(64, ge=2)
    dim: int = Field(32, ge=2)
    noise_levels: list[float] = [0.0, 0.1, 0.3, 1.0, 2.0]
    party_counts: list[int] = [2, 4, 8, 16]
    synthetic_identities: int = Field(200, ge=4)
    data_dir: str | None = None


DATASETS = ("synthetic", "orl")


@dataclass(frozen=True)
class CollusionRow:
    """One release under noise ``(sigma, tau)``, scored by utility and by every attack.

    ``sweep`` is ``"tradeoff"`` (noise sweep at the configured party count) or ``"parties"``
    (party-count sweep at the middle anchor noise). Linkage and error are NaN when the attack
    refused the release. ``targets`` is the number of non-colluders' records attacked.
    """

    dataset: str
    sweep: str
    parties: int
    sigma: float
    tau: float
    accuracy: float
    inversion_linkage: float
    inversion_error: float
    procrustes_linkage: float
    procrustes_error: float
    pivot_linkage: float
    pivot_error: float
    targets: int


@dataclass(frozen=True)
class RefusalRow:
    """Whether the exact attack refused an anchor too small for full column rank."""

    refused: bool


Row = CollusionRow | RefusalRow


def sweep_rows(rows: Sequence[Row], dataset: str, sweep: str) -> list[CollusionRow]:
    return [
        r for r in rows if isinstance(r, CollusionRow) and (r.dataset, r.sweep) == (dataset, sweep)
    ]


def _tradeoff(rows: Sequence[Row], dataset: str) -> tuple[list[CollusionRow], CollusionRow | None]:
    """The noise sweep of ``dataset`` and its noiseless row (None without data)."""
    sweep = sweep_rows(rows, dataset, "tradeoff")
    return sweep, next((r for r in sweep if r.sigma == 0 and r.tau == 0), None)


def _no_data(text: str, dataset: str) -> Claim:
    return not_tested(text, f"no rows for data set {dataset!r} (its data was not found)")


def claim_exact_recovery(rows: Sequence[Row], cfg: CollusionConfig, dataset: str) -> Claim:
    """A noiseless full-rank anchor gives exact recovery."""
    text = f"{dataset}: a noiseless full-rank anchor gives exact recovery (100% linkage, "
    text += "float64 error)"
    sweep, clean = _tradeoff(rows, dataset)
    if clean is None:
        return _no_data(text, dataset)
    return claim(
        text,
        clean.inversion_linkage == 1.0 and clean.inversion_error < 1e-9,
        linkage=clean.inversion_linkage,
        error=clean.inversion_error,
    )


def claim_private_noise_costly(rows: Sequence[Row], cfg: CollusionConfig, dataset: str) -> Claim:
    """Private-side noise reaches low linkage only with a large accuracy drop."""
    text = (
        f"{dataset}: private-side noise buys low linkage only with a large accuracy drop "
        "(> 5 points)"
    )
    sweep, clean = _tradeoff(rows, dataset)
    if clean is None:
        return _no_data(text, dataset)
    sig = [r for r in sweep if r.sigma > 0]
    low = [r for r in sig if r.procrustes_linkage <= 0.5 * clean.procrustes_linkage]
    table = [(r.sigma, round(r.accuracy, 3), round(r.procrustes_linkage, 3)) for r in sig]
    if not low:
        reason = "no private-noise level in the sweep reaches half the noiseless linkage"
        return not_tested(text, reason, rows=table)
    return claim(text, all(r.accuracy < clean.accuracy - 0.05 for r in low), rows=table)


def _anchor_noise_claim(rows: Sequence[Row], dataset: str, text: str, attack: str) -> Claim:
    """Some anchor-noise level keeps accuracy within 2 points and ``attack``'s linkage at half
    the noiseless level or below."""
    sweep, clean = _tradeoff(rows, dataset)
    if clean is None:
        return _no_data(text, dataset)
    taus = [r for r in sweep if r.tau > 0]
    if not taus:
        return not_tested(text, "no anchor-noise level in the sweep")
    key = f"{attack}_linkage"
    limit = 0.5 * getattr(clean, key)
    good = [r for r in taus if r.accuracy >= clean.accuracy - 0.02 and getattr(r, key) <= limit]
    return claim(
        text,
        bool(good),
        rows=[(r.tau, round(r.accuracy, 3), round(getattr(r, key), 3)) for r in taus],
    )


def claim_anchor_noise_procrustes(rows: Sequence[Row], cfg: CollusionConfig, dataset: str) -> Claim:
    """Some anchor-side noise level keeps accuracy at half the anchor attack's linkage."""
    text = (
        f"{dataset}: anchor-side noise keeps accuracy (within 2 points) at low anchor-attack "
        "linkage (half the noiseless)"
    )
    return _anchor_noise_claim(rows, dataset, text, "procrustes")


def claim_anchor_noise_pivot(rows: Sequence[Row], cfg: CollusionConfig, dataset: str) -> Claim:
    """Some anchor-side noise level keeps accuracy at half the pivot attack's linkage."""
    text = (
        f"{dataset}: anchor-side noise also keeps the pivot attack's linkage at half the "
        "noiseless level or below, at accuracy within 2 points"
    )
    return _anchor_noise_claim(rows, dataset, text, "pivot")


def claim_parties_keep_utility(rows: Sequence[Row], cfg: CollusionConfig, dataset: str) -> Claim:
    """Accuracy at the most parties is no more than 2 points below that at the fewest."""
    text = (
        f"{dataset}: more participants do not lower utility under anchor noise (accuracy "
        "at the most parties >= at the fewest - 2 points)"
    )
    pc = sorted(sweep_rows(rows, dataset, "parties"), key=lambda r: r.parties)
    if not pc:
        return _no_data(text, dataset)
    if pc[0].parties == pc[-1].parties:
        return not_tested(text, "a claim across party counts needs at least two of them")
    return claim(
        text,
        pc[-1].accuracy >= pc[0].accuracy - 0.02,
        rows=[
            (
                r.parties,
                round(r.accuracy, 3),
                round(r.procrustes_linkage, 3),
                round(r.pivot_linkage, 3),
            )
            for r in pc
        ],
    )


def claim_rank_refusal(rows: Sequence[Row], cfg: CollusionConfig) -> Claim:
    """The exact attack refuses an anchor too small for full column rank."""
    text = (
        "an anchor too small for full column rank is refused by the exact attack with a clear error"
    )
    ref = [r for r in rows if isinstance(r, RefusalRow)]
    if not ref:
        return not_tested(text, "the rank-deficient anchor was not tried")
    return claim(text, all(r.refused for r in ref), tries=len(ref))


_PER_DATASET = (
    claim_exact_recovery,
    claim_private_noise_costly,
    claim_anchor_noise_procrustes,
    claim_anchor_noise_pivot,
    claim_parties_keep_utility,
)
CLAIMS: tuple[ClaimFn, ...] = (
    *(partial(fn, dataset=name) for name in DATASETS for fn in _PER_DATASET),
    claim_rank_refusal,
)


LINKAGE_RULE = (
    "identity linkage: the reconstruction's cosine top-1 neighbour among all records has the "
    "record's identity"
)
ATTACKS = ("inversion", "procrustes", "pivot")


def _finding(r: CollusionRow, attack: str) -> AttackFinding:
    linkage = getattr(r, f"{attack}_linkage")
    return scored_finding(
        attack,
        share_count(linkage, r.targets),
        r.targets,
        rule=LINKAGE_RULE,
        detail=f"relative reconstruction error {getattr(r, f'{attack}_error'):.3g}",
    )


def risk_of(rows: Sequence[Row], cfg: CollusionConfig) -> RiskCard:
    """The card of the (data set, noise, party count) release whose non-colluders' records an
    attack linked to their identities most often (an attack that refused the release, NaN, is
    left out)."""
    releases: dict[str, Release] = {
        f"the Data Collaboration uploads of {r.parties} parties on {r.dataset} (sigma "
        f"{r.sigma:g}, tau {r.tau:g}), party 0 colluding": (
            [_finding(r, a) for a in ATTACKS if not math.isnan(getattr(r, f"{a}_linkage"))],
            [],
        )
        for r in rows
        if isinstance(r, CollusionRow)
    }
    return riskiest_card(releases)
