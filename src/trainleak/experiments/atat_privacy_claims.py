"""Claims of ``atat-privacy`` (seed 8, AT-AT), pure functions of the rows of
:mod:`.model_inversion_claims`, each unit-tested on both sides.

Torp, Smith and Breuer, "Reducing information dependency does not cause training data privacy.
Adversarially non-robust features do.", ICLR 2026. The attack judged is the standard
(PPA-style) attack under the standard evaluator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trainleak.experiments.base import Claim, claim, not_tested
from trainleak.experiments.model_inversion_claims import (
    AtatPrivacyConfig,
    AttackRow,
    RelianceRow,
    Row,
    _acc,
    _targets,
)
from trainleak.metrics.intervals import difference_lower_bound
from trainleak.metrics.inversion import spearman


def _best_atat(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> str | None:
    """The AT-AT model with the lowest Acc@1 among those within ``clean_tolerance`` of the
    standard model's clean accuracy (``None`` if there is none, or no standard model)."""
    tg, acc = _targets(rows), _acc(rows, "standard")
    if "standard" not in tg:
        return None
    floor = tg["standard"].clean_accuracy - cfg.clean_tolerance
    ok = [t for t, r in tg.items() if r.family == "atat" and t in acc and r.clean_accuracy >= floor]
    return min(ok, key=lambda t: acc[t].acc1) if ok else None


def atat_lowers_attack(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> Claim:
    """Some AT-AT model within ``clean_tolerance`` of the standard model's clean accuracy has an
    Acc@1 interval entirely below the standard model's."""
    text = "AT-AT lowers attack accuracy at about equal clean accuracy"
    tg, acc = _targets(rows), _acc(rows, "standard")
    if "standard" not in tg or "standard" not in acc:
        return not_tested(text, "no standard model")
    base_clean, base = tg["standard"].clean_accuracy, acc["standard"]
    best = _best_atat(rows, cfg)
    if best is None:
        return not_tested(text, "no AT-AT model within the clean-accuracy tolerance")
    return claim(
        text,
        acc[best].acc1_hi < base.acc1_lo,
        best=best,
        atat_acc1=acc[best].acc1,
        standard_acc1=base.acc1,
        atat_clean=tg[best].clean_accuracy,
        standard_clean=base_clean,
        ratio=acc[best].acc1 / base.acc1 if base.acc1 > 0 else math.inf,
    )


def at_raises_attack(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> Claim:
    """The AT model's Acc@1 interval lies entirely above the standard model's."""
    text = "Adversarial training raises attack accuracy"
    acc = _acc(rows, "standard")
    if "at" not in acc or "standard" not in acc:
        return not_tested(text, "no AT or standard model")
    at, std = acc["at"], acc["standard"]
    return claim(
        text,
        at.acc1_lo > std.acc1_hi,
        at=at.acc1,
        standard=std.acc1,
        at_interval=(at.acc1_lo, at.acc1_hi),
        standard_interval=(std.acc1_lo, std.acc1_hi),
    )


def hsic_does_not_separate(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> Claim:
    """'Private' models (Acc@1 at most half the standard model's) and the others have
    overlapping ranges of HSIC(X, Z) and of HSIC(Y, Z)."""
    text = "HSIC does not separate private from non-private models"
    tg, acc = _targets(rows), _acc(rows, "standard")
    if "standard" not in acc:
        return not_tested(text, "no standard model")
    half = acc["standard"].acc1 / 2
    names = [t for t in tg if t in acc]
    private = [t for t in names if acc[t].acc1 <= half]
    public = [t for t in names if acc[t].acc1 > half]
    if not private or not public:
        return not_tested(text, "needs both private and non-private models", private=private)

    def overlap(key: str) -> bool:
        a = [getattr(tg[t], key) for t in private]
        b = [getattr(tg[t], key) for t in public]
        return min(a) <= max(b) and min(b) <= max(a)

    xz, yz = overlap("hsic_xz"), overlap("hsic_yz")
    return claim(text, xz and yz, private=private, overlap_xz=xz, overlap_yz=yz)


def memorising_stays_hard(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> Claim:
    """The memorising model's Acc@1 is not above the standard model's interval."""
    text = "The maximally memorising model stays hard to invert"
    acc = _acc(rows, "standard")
    if "memorise" not in acc or "standard" not in acc:
        return not_tested(text, "no memorising or standard model")
    mem, std = acc["memorise"], acc["standard"]
    return claim(
        text, mem.acc1 <= std.acc1_hi, memorise=mem.acc1, standard=std.acc1, standard_hi=std.acc1_hi
    )


def droplayer_still_inverted(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> Claim:
    """The drop-layer model's Acc@1 lower bound exceeds chance and the prior-only baseline on
    it (the prior fills in the unseen pixels)."""
    text = "The drop-layer model (about 3% of pixels seen) is still inverted"
    acc, base = _acc(rows, "standard"), _acc(rows, "prior_only")
    if "droplayer" not in acc or "droplayer" not in base:
        return not_tested(text, "no drop-layer model or its baseline")
    d = acc["droplayer"]
    holds = d.acc1_lo > d.chance and d.acc1_lo > base["droplayer"].acc1
    return claim(
        text, holds, acc1=d.acc1, lo=d.acc1_lo, prior_only=base["droplayer"].acc1, chance=d.chance
    )


def monotone_in_robustness(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> Claim:
    """Across the standard, AT and AT-AT models, Spearman(mean robust accuracy over the epsilon
    grid, Acc@1) is at least ``min_rho``."""
    text = f"Attack accuracy is monotone in robustness across the AT-AT knob (rho >= {cfg.min_rho})"
    tg, acc = _targets(rows), _acc(rows, "standard")
    names = [t for t in tg if t in acc and tg[t].family in ("standard", "at", "atat")]
    rho = spearman([tg[t].robust_mean for t in names], [acc[t].acc1 for t in names])
    if math.isnan(rho):
        return not_tested(text, "fewer than three models or a constant sequence", rho=rho)
    return claim(text, rho >= cfg.min_rho, rho=rho, models=names)


def _reliance(rows: Sequence[Row]) -> dict[str, dict[int, float]]:
    """Per model, per replicate seed, its reliance on the non-robust cue."""
    out: dict[str, dict[int, float]] = {}
    for r in rows:
        if isinstance(r, RelianceRow) and not math.isnan(r.reliance):
            out.setdefault(r.target, {})[r.seed] = r.reliance
    return out


def _paired_gain(
    rel: dict[str, dict[int, float]], high: str, low: str
) -> tuple[float, float, int] | None:
    """Mean of ``high - low`` over their shared seeds, its one-sided 95% paired t lower
    bound, and the number of seeds (``None`` with fewer than two)."""
    seeds = sorted(set(rel.get(high, {})) & set(rel.get(low, {})))
    if len(seeds) < 2:
        return None
    a, b = [rel[high][s] for s in seeds], [rel[low][s] for s in seeds]
    gain = sum(a) / len(a) - sum(b) / len(b)
    return gain, difference_lower_bound(a, b, paired=True), len(seeds)


def _means(rel: dict[str, dict[int, float]]) -> dict[str, float]:
    return {t: sum(v.values()) / len(v) for t, v in rel.items()}


def at_drops_nonrobust_cue(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> Claim:
    """On the two-cue task, the AT model follows the non-robust cue less often than the
    standard model: the paired (same seeds) one-sided 95% lower bound on standard - AT
    reliance is above 0."""
    text = "Adversarial training stops the model leaning on the imperceptible (non-robust) cue"
    rel = _reliance(rows)
    got = _paired_gain(rel, "standard", "at")
    if got is None:
        return not_tested(text, "fewer than two seeds of the standard and AT models")
    gain, lower, n = got
    return claim(text, lower > 0, drop=gain, drop_lower_95=lower, seeds=n, reliance=_means(rel))


def atat_leans_on_nonrobust_cue(rows: Sequence[Row], cfg: AtatPrivacyConfig) -> Claim:
    """On the two-cue task, the AT-AT model the privacy claim credits (lowest Acc@1 within
    the clean-accuracy tolerance) follows the non-robust cue more often than the standard
    model: the paired one-sided 95% lower bound on AT-AT - standard reliance is above 0
    (the seed's account of why AT-AT protects: it leans on non-robust features)."""
    text = "AT-AT leans on the imperceptible (non-robust) cue more than the standard model"
    best = _best_atat(rows, cfg)
    if best is None:
        return not_tested(text, "no AT-AT model within the clean-accuracy tolerance")
    rel = _reliance(rows)
    got = _paired_gain(rel, best, "standard")
    if got is None:
        return not_tested(text, f"fewer than two seeds of {best} and the standard model")
    gain, lower, n = got
    return claim(
        text, lower > 0, model=best, gain=gain, gain_lower_95=lower, seeds=n, reliance=_means(rel)
    )


ATAT_CLAIMS = (
    atat_lowers_attack,
    at_raises_attack,
    hsic_does_not_separate,
    memorising_stays_hard,
    droplayer_still_inverted,
    monotone_in_robustness,
    at_drops_nonrobust_cue,
    atat_leans_on_nonrobust_cue,
)

__all__ = ["ATAT_CLAIMS", "AttackRow"]
