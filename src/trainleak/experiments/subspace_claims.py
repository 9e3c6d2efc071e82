"""Rows and claims of ``subspace-reconstruction`` (seed 12), as pure functions of the rows.

The run produces two kinds of frozen rows: :class:`WidthRow` (random-feature width sweep),
:class:`ImageRow` (two-layer networks on images, one row per method and width, including the
optimizer control). Each claim is a function ``(rows, config) -> Claim``;
the per-dataset claims take the data set's name as a keyword and are bound per run by
:func:`claim_functions`. Comparisons between methods on the same trained network are paired
by training image (each image's SSIM with its one-to-one match) and decided by a one-sided 95%
lower confidence bound on the mean difference, not by comparing medians.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

from trainleak.bounds.random_features import empirical_transition, width_threshold
from trainleak.experiments.base import Claim, ClaimFn, claim, not_tested
from trainleak.experiments.risk import Release, RiskCard, riskiest_card, threshold_finding
from trainleak.metrics.intervals import difference_lower_bound

ATTACKS: tuple[str, ...] = ("subspace-aware", "full space")
"""The two attacks of part (b); every other image ``method`` is a trivial baseline."""

LEVEL = 0.95
"""Confidence of the one-sided intervals over the training images."""

RF_CONDITIONS: tuple[str, ...] = (
    "full space, general data",
    "full space, subspace data",
    "subspace search, subspace data",
)


@dataclass(frozen=True)
class WidthRow:
    """Random features at width ``width``: matched error and final projection loss per search.

    ``errors`` and ``losses`` follow :data:`RF_CONDITIONS`; the error is the mean Hungarian
    matched l2 distance divided by sqrt(d).
    """

    width: int
    p_over_dn: float
    p_over_sn: float
    errors: tuple[float, float, float]
    losses: tuple[float, float, float]

    def error(self, condition: str) -> float:
        """The matched error of one of :data:`RF_CONDITIONS`."""
        return self.errors[RF_CONDITIONS.index(condition)]


@dataclass(frozen=True)
class ImageRow:
    """One method's scores on the 10 training images of one trained two-layer network.

    ``part`` is ``widths`` (the GD width sweep) or ``control`` (the optimizer control at the
    largest width, where ``span_energy`` is the share of ||W1_T - W1_0||^2 in span{x_i}).
    ``ssim`` holds each training image's SSIM with its one-to-one (Hungarian, NCC) match.
    """

    part: Literal["widths", "control"]
    dataset: str
    width: int
    optimizer: str
    method: str
    train_loss: float
    ssim: tuple[float, ...]
    median_ssim: float
    mean_ssim: float
    median_psnr: float
    ssim_at_least_04: int
    ssim_at_least_06: int
    projection_loss: float | None = None
    subspace_dim: int | None = None
    seconds: float | None = None
    span_energy: float | None = None


Row = WidthRow | ImageRow
T = TypeVar("T")


def _of(rows: Sequence[Any], kind: type[T]) -> list[T]:
    return [r for r in rows if isinstance(r, kind)]


def _transition(rows: Sequence[Any], condition: str, tol: float) -> float | None:
    sweep = sorted(_of(rows, WidthRow), key=lambda r: r.width)
    widths = [r.width for r in sweep]
    return empirical_transition(widths, [r.error(condition) for r in sweep], tol=tol)


def claim_full_space_transition(rows: Sequence[Any], cfg: Any) -> Claim:
    """The full-space transition lies between 1 and 8 times d*n."""
    d, n = cfg.rf_dim, cfg.rf_n
    t = _transition(rows, RF_CONDITIONS[0], cfg.rf_tol)
    return claim(
        "Random features: full-space reconstruction switches from failure to recovery at a width "
        "of order d*n (here between 1 and 8 times d*n)",
        t is not None and 1.0 <= t / (d * n) <= 8.0,
        transition_width=t,
        dn=d * n,
        tol=cfg.rf_tol,
    )


def claim_subspace_lowers_threshold(rows: Sequence[Any], cfg: Any) -> Claim:
    """The subspace search recovers from a smaller width than the full-space search."""
    t_full = _transition(rows, RF_CONDITIONS[1], cfg.rf_tol)
    t_sub = _transition(rows, RF_CONDITIONS[2], cfg.rf_tol)
    inf = float("inf")
    return claim(
        "Restricting the search to the data's s-dimensional subspace lowers the width needed for "
        "recovery (towards s*n) below what the full-space search needs on the same data",
        (t_sub if t_sub is not None else inf) < (t_full if t_full is not None else inf),
        subspace_transition=t_sub,
        full_space_transition=t_full,
        sn=cfg.rf_subspace_dim * cfg.rf_n,
        dn=cfg.rf_dim * cfg.rf_n,
    )


def _sweep(rows: Sequence[Any], dataset: str) -> list[ImageRow]:
    return [r for r in _of(rows, ImageRow) if r.part == "widths" and r.dataset == dataset]


def _method(rows: Sequence[ImageRow], method: str, width: int) -> ImageRow:
    return next(r for r in rows if r.method == method and r.width == width)


def _paired_gain(a: ImageRow, b: ImageRow) -> float:
    """One-sided 95% lower bound on mean SSIM(a) - SSIM(b), paired by training image."""
    return difference_lower_bound(a.ssim, b.ssim, LEVEL, paired=True)


def claim_beats_full_space(rows: Sequence[Any], cfg: Any, *, dataset: str) -> Claim:
    """The subspace-aware attack has the higher SSIM at every width (paired interval)."""
    sweep = _sweep(rows, dataset)
    widths = sorted({r.width for r in sweep})
    pairs = [(_method(sweep, ATTACKS[0], w), _method(sweep, ATTACKS[1], w)) for w in widths]
    gains = [_paired_gain(a, b) for a, b in pairs]
    return claim(
        f"{dataset}: the subspace-aware attack beats full-space projection at every width "
        "(higher SSIM after one-to-one matching: one-sided 95% lower bound of the mean "
        "per-image SSIM difference above 0)",
        bool(pairs) and all(g > 0 for g in gains),
        widths=widths,
        ssim_gain_lower_bound=[round(g, 3) for g in gains],
        subspace_median_ssim=[round(a.median_ssim, 3) for a, _ in pairs],
        full_space_median_ssim=[round(b.median_ssim, 3) for _, b in pairs],
    )


def claim_beats_trivial_baseline(rows: Sequence[Any], cfg: Any, *, dataset: str) -> Claim:
    """At the largest width the subspace-aware attack beats every trivial baseline."""
    sweep = _sweep(rows, dataset)
    widest = max(r.width for r in sweep)
    at = [r for r in sweep if r.width == widest]
    sub = _method(at, ATTACKS[0], widest)
    gains = {r.method: _paired_gain(sub, r) for r in at if r.method not in ATTACKS}
    worst = min(gains, key=lambda m: gains[m])
    return claim(
        f"{dataset}: at the largest width the subspace-aware attack beats every trivial "
        "baseline scored by the same code (one-sided 95% lower bound of the mean per-image "
        "SSIM difference above 0; the baselines use no training image)",
        gains[worst] > 0,
        width=widest,
        attack_median_ssim=round(sub.median_ssim, 3),
        closest_baseline=worst,
        baseline_median_ssim=round(_method(at, worst, widest).median_ssim, 3),
        ssim_gain_lower_bound=round(gains[worst], 3),
    )


def claim_adam_breaks_span(rows: Sequence[Any], cfg: Any) -> Claim:
    """Adam moves first-layer energy out of the data span and lowers the attack's SSIM."""
    ctrl = {r.optimizer: r for r in _of(rows, ImageRow) if r.part == "control"}
    text = (
        "Adam breaks the span property the subspace step relies on: part of the first-layer "
        "change leaves the data span, and the subspace-aware attack scores lower (one-sided "
        "95% lower bound of the per-image SSIM drop above 0)"
    )
    gd, ad = ctrl["gd"], ctrl["adam"]
    if gd.span_energy is None or ad.span_energy is None:
        return not_tested(text, "span energy was not measured for both optimizers")
    drop = _paired_gain(gd, ad)
    return claim(
        text,
        ad.span_energy < gd.span_energy - 1e-3 and drop > 0,
        gd_energy_in_span=gd.span_energy,
        adam_energy_in_span=ad.span_energy,
        gd_median_ssim=gd.median_ssim,
        adam_median_ssim=ad.median_ssim,
        ssim_drop_lower_bound=drop,
    )


RF_CLAIMS: tuple[ClaimFn, ...] = (claim_full_space_transition, claim_subspace_lowers_threshold)
DATASET_CLAIMS = (claim_beats_full_space, claim_beats_trivial_baseline)
CONTROL_CLAIMS: tuple[ClaimFn, ...] = (claim_adam_breaks_span,)


def claim_functions(cfg: Any) -> tuple[ClaimFn, ...]:
    """The run's claims in report order: random features, each data set, the control."""
    per_dataset = tuple(partial(fn, dataset=name) for name in cfg.datasets for fn in DATASET_CLAIMS)
    control = CONTROL_CLAIMS if cfg.adam_control and cfg.datasets else ()
    return (*RF_CLAIMS, *per_dataset, *control)


def rf_metrics(rows: Sequence[Any], cfg: Any) -> dict[str, Any]:
    """The three empirical transitions and the counting thresholds d*n and s*n."""
    d, n, s = cfg.rf_dim, cfg.rf_n, cfg.rf_subspace_dim
    t = [_transition(rows, c, cfg.rf_tol) for c in RF_CONDITIONS]
    return {
        "rf_transition_full": t[0],
        "rf_transition_full_on_subspace_data": t[1],
        "rf_transition_subspace": t[2],
        "dn": width_threshold(d, n),
        "sn": width_threshold(d, n, s),
    }


SUBSPACE_RULE = "SSIM >= 0.6 after one-to-one (Hungarian, NCC) matching"
"""Success rule of one training image for the risk card (the stricter of the two counts)."""


def risk_of(rows: Sequence[Any], cfg: Any) -> RiskCard:
    """The card of the trained two-layer network (part b) from which an attack recovered the
    most images beyond the trivial baselines by :data:`SUBSPACE_RULE`. The random-feature sweep
    (part a) records a mean matched error per width, not per record, so it has no card."""
    images = _of(rows, ImageRow)
    releases: dict[str, Release] = {}
    for key in dict.fromkeys((r.part, r.dataset, r.width, r.optimizer) for r in images):
        mine = [r for r in images if (r.part, r.dataset, r.width, r.optimizer) == key]
        base = [r.ssim for r in mine if r.method not in ATTACKS]
        found = [
            threshold_finding(
                r.method, r.ssim, 0.6, rule=SUBSPACE_RULE, baselines=base, quality=r.median_ssim
            )
            for r in mine
            if r.method in ATTACKS
        ]
        name = f"initial and final weights of a width-{key[2]} MLP trained by {key[3]} on {key[1]}"
        releases[name + (" (optimizer control)" if key[0] == "control" else "")] = (found, [])
    return riskiest_card(releases)
