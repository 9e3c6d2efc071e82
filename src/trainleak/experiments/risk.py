"""The risk card: the strongest attack, the strongest bound, the gap, one verdict.

A :class:`RiskCard` sits at the top of every report. It is built from typed findings, never
from display text: an :class:`AttackFinding` says what one attack recovered (how many records,
at what quality, with what certainty), a :class:`BoundFinding` what a bound proves cannot be
recovered. :func:`risk_card` picks the strongest of each and computes the verdict with
:func:`verdict`, a pure function a reviewer can read in full:

* ``high``: an attack recovered at least one record, certified without ground truth, or scored
  against the user's reference set and beating a baseline given the same budget;
* ``review``: an attack produced candidates that nothing scores (no certificate, no reference
  set); they may or may not be training records;
* ``low``: no attack recovered anything (beyond its baseline) and a bound valid for every
  attack applies;
* ``unproven``: no attack recovered anything, and no bound applies: nothing proves the data safe;
* ``unmeasured``: no attack could run on this release with this knowledge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

Certainty = Literal["certified", "ground truth", "self-assessed"]
Level = Literal["high", "review", "low", "unproven", "unmeasured"]
LEVELS: tuple[str, ...] = ("high", "review", "low", "unproven", "unmeasured")
MSE_UNIT = "mean squared error per coordinate"


@dataclass(frozen=True)
class AttackFinding:
    """What one attack recovered.

    Attributes:
        attack: the attack's name.
        candidates: reconstructions it produced.
        recovered: records recovered (``None`` when nothing can tell: no certificate and no
            ground truth).
        of: out of how many records (batch size, training-set size, reference-set size).
        quality: the quality figure of ``quality_metric`` (e.g. median SSIM), if any.
        quality_metric: what ``recovered`` and ``quality`` mean, in words.
        certainty: ``certified`` (a certificate computed without ground truth),
            ``ground truth`` (scored against the user's reference set) or ``self-assessed``
            (only the attack's own fit).
        baseline_recovered: what a baseline with the same budget recovered by the same rule.
        baseline_kind: what that baseline is, in words (default: an equal-budget baseline
            attack; scoring per class or per text compares with a chance quantile instead).
        error: mean squared error per coordinate on the [0, 1] scale, against ground truth.
        detail: one sentence of the attack's own evidence (residual, loss, ...).
        certified: candidates the attack certified itself (``None``: it issues no certificate).
        unit: what ``recovered`` and ``of`` count, in words (model inversion recovers classes,
            not records).
    """

    attack: str
    candidates: int
    recovered: int | None
    of: int | None
    quality: float | None = None
    quality_metric: str = ""
    certainty: Certainty = "self-assessed"
    baseline_recovered: int | None = None
    baseline_kind: str = "a baseline given the same budget"
    error: float | None = None
    detail: str = ""
    certified: int | None = None
    unit: str = "training records"

    @property
    def beyond_baseline(self) -> int | None:
        """Records recovered beyond the baseline (``recovered`` when there is no baseline)."""
        if self.recovered is None:
            return None
        return self.recovered - (self.baseline_recovered or 0)


@dataclass(frozen=True)
class BoundFinding:
    """What a bound proves about every (or every admissible) attack.

    Attributes:
        name: the bound's name.
        value: its value.
        unit: what ``value`` measures.
        kind: ``lower`` (error at least ``value``) or ``upper`` (success at most ``value``).
        statement: the guarantee in one plain sentence.
        assumptions: what must hold for it.
        general: it holds for every attack (not only, e.g., unbiased estimators).
    """

    name: str
    value: float
    unit: str
    kind: Literal["lower", "upper"]
    statement: str
    assumptions: str = ""
    general: bool = True


@dataclass(frozen=True)
class RiskCard:
    """The summary at the top of a report.

    Attributes:
        release: one line describing the release.
        attack: the strongest attack's finding (``None`` when none ran).
        bound: the strongest applicable bound (``None`` when none applies).
        gap: the comparison of attack and bound (:class:`Gap`).
        level: one of :data:`LEVELS`.
        verdict: the plain-language verdict.
        attacks_run: how many attacks ran.
    """

    release: str
    attack: AttackFinding | None
    bound: BoundFinding | None
    gap: Gap
    level: Level
    verdict: str
    attacks_run: int


@dataclass(frozen=True)
class Gap:
    """The strongest attack against the strongest bound.

    Attributes:
        text: the comparison in words.
        scale: ``"mse"`` (error per coordinate, [0, 1] scale: the attack must stay above a
            lower bound), ``"success"`` (a rate: it must stay below an upper bound), or ``""``
            when the two are not on one scale.
        attack_value: the attack's figure on that scale.
        bound_value: the bound's.
        value: the room the bound leaves (``attack - bound`` for ``mse``, ``bound - attack``
            for ``success``); negative would mean the bound is broken.
    """

    text: str
    scale: Literal["mse", "success", ""] = ""
    attack_value: float | None = None
    bound_value: float | None = None
    value: float | None = None


def _attack_key(f: AttackFinding) -> tuple[int, int, float, int, int]:
    """Tier 2: records recovered beyond the baseline, certified or scored against ground truth;
    tier 1: candidates nothing scores (they may be anything); tier 0: scored, nothing beyond."""
    beyond = f.beyond_baseline
    if beyond is not None and beyond > 0 and f.certainty != "self-assessed":
        tier = 2
    elif beyond is None or (f.certainty == "certified" and f.candidates > beyond):
        tier = 1
    else:
        tier = 0
    beyond_key = beyond if beyond is not None else -1
    # equal findings: the certified one, then the one needing fewer candidates
    return (tier, beyond_key, f.quality or 0.0, f.certified or 0, -f.candidates)


def strongest_attack(findings: Sequence[AttackFinding]) -> AttackFinding | None:
    """The finding with the most records recovered beyond its baseline, certainty first; among
    equals, the better quality, then the one certified, then the one with fewer candidates."""
    return max(findings, key=_attack_key, default=None)


def strongest_bound(bounds: Sequence[BoundFinding]) -> BoundFinding | None:
    """A bound valid for every attack before one with restrictions; then one on the error of a
    reconstruction (comparable with an attack's error), then one on success; within a unit,
    the tightest (largest lower bound, smallest upper bound)."""

    def key(b: BoundFinding) -> tuple[bool, int, float]:
        unit = 2 if b.unit.startswith(MSE_UNIT) else int(b.unit == "success probability")
        return (b.general, unit, b.value if b.kind == "lower" else -b.value)

    return max(bounds, key=key, default=None)


def gap(attack: AttackFinding | None, bound: BoundFinding | None) -> Gap:
    """The distance between what the best attack achieved and what the bound allows."""
    if attack is None or bound is None:
        return Gap(f"not measured: {'no attack ran' if attack is None else 'no bound applies'}")
    if bound.unit.startswith(MSE_UNIT) and attack.error is not None:
        ratio = attack.error / bound.value if bound.value > 0 else float("inf")
        return Gap(
            f"the best attack's error is {attack.error:.4g} per coordinate, {ratio:.3g} times "
            f"the bound {bound.value:.4g}",
            "mse",
            attack.error,
            bound.value,
            attack.error - bound.value,
        )
    scored = attack.certainty != "self-assessed" and attack.recovered is not None
    if bound.unit == "success probability" and scored and attack.of:
        rate = (attack.recovered or 0) / attack.of
        return Gap(
            f"the best attack recovered {rate:.3g} of the {attack.unit}; the bound allows at most "
            f"{bound.value:.3g}",
            "success",
            rate,
            bound.value,
            bound.value - rate,
        )
    return Gap(
        f"not on one scale: the attack reports {attack.quality_metric or 'candidates'}, "
        f"the bound {bound.unit}"
    )


def verdict(attack: AttackFinding | None, bound: BoundFinding | None) -> tuple[Level, str]:
    """The level and the plain-language verdict (see the module docstring for the rules)."""
    bound_text = (
        f" The strongest bound ({bound.name}) proves: {bound.statement}."
        if bound is not None
        else " No lower bound applies to this release."
    )
    if attack is None:
        return "unmeasured", (
            "Nothing was measured: no attack applies to this release with the given knowledge "
            "(see `trainleak attacks --release`)." + bound_text
        )
    beyond = attack.beyond_baseline
    if beyond is not None and beyond > 0 and attack.certainty != "self-assessed":
        how = f"{attack.recovered} of {attack.of}" if attack.of else f"{attack.recovered}"
        return "high", (
            f"Do not release as is: {attack.attack} recovered {how} {attack.unit} "
            f"({attack.quality_metric}; {certainty_phrase(attack)})." + bound_text
        )
    if beyond is None or (attack.certainty == "certified" and attack.candidates > beyond):
        return "review", (
            f"Not cleared: {attack.attack} produced {attack.candidates} candidate "
            f"reconstructions that nothing scores ({attack.detail or 'no certificate'}). "
            "Supply a reference set of the training records (--private) to score them, or "
            "inspect the candidates." + bound_text
        )
    measured = _measured(attack)
    if bound is not None and bound.general:
        return "low", (
            f"Low measured risk: {measured}, and {bound.statement} (assuming "
            f"{bound.assumptions or 'the release is as declared'})."
        )
    return "unproven", (
        f"Not shown safe: {measured}, but no bound valid for every attack applies, so nothing "
        "proves the data safe either; a failed attack is not evidence of privacy. Training "
        "with DP-SGD and declaring its schedule (dp_sgd) gives a bound."
    )


def _measured(f: AttackFinding) -> str:
    """What the strongest attack achieved, against its baseline, in a clause."""
    how = f"{f.recovered} of {f.of}" if f.of else f"{f.recovered}"
    text = f"{f.attack} recovered {how} {f.unit} ({f.quality_metric})"
    if f.baseline_recovered is not None:
        text += f", no more than {f.baseline_kind} ({f.baseline_recovered})"
    return text


def certainty_phrase(f: AttackFinding) -> str:
    """How sure the finding is, in words."""
    if f.certainty == "certified":
        return "certified by the attack itself, without ground truth"
    if f.certainty == "self-assessed":
        return "unverified: only the attack's own fit"
    parts = ["confirmed against ground truth (the reference set, or the simulated records)"]
    if f.baseline_recovered is not None:
        parts.append(f"{f.baseline_kind}: {f.baseline_recovered}")
    if f.certified:
        parts.append(f"{f.certified} also certified by the attack without ground truth")
    return ", ".join(parts)


def risk_card(
    release: str, findings: Sequence[AttackFinding], bounds: Sequence[BoundFinding]
) -> RiskCard:
    """The card for ``release`` from every attack's finding and every applicable bound."""
    attack, bound = strongest_attack(findings), strongest_bound(bounds)
    level, text = verdict(attack, bound)
    return RiskCard(release, attack, bound, gap(attack, bound), level, text, len(findings))


# -- building cards from an experiment's rows -------------------------------------------------
# Every experiment's ``risk_of(rows, config)`` turns its rows into findings per release with
# the helpers below, then keeps the riskiest release's card (:func:`riskiest_card`).

_SEVERITY = {"unmeasured": 0, "low": 1, "unproven": 2, "review": 3, "high": 4}
Release = tuple[Sequence[AttackFinding], Sequence[BoundFinding]]


def count_passing(scores: Iterable[float], threshold: float, *, above: bool = True) -> int:
    """How many per-record scores pass ``threshold`` (``>=`` it, or ``<=`` with ``above=False``);
    NaN passes neither way."""
    return sum(1 for s in scores if (s >= threshold if above else s <= threshold))


def share_count(share: float, of: int) -> int:
    """A measured share of ``of`` records as a count (NaN, a refused attack, as 0)."""
    return 0 if math.isnan(share) else round(share * of)


def scored_finding(
    attack: str,
    recovered: int,
    of: int,
    *,
    rule: str,
    baseline: int | None = None,
    candidates: int | None = None,
    quality: float | None = None,
    error: float | None = None,
    detail: str = "",
    certified: int | None = None,
    unit: str = "training records",
    baseline_kind: str = "a baseline given the same budget",
) -> AttackFinding:
    """An attack scored against the simulation's ground truth by the experiment's own rule.

    Args:
        recovered: records that pass ``rule``, out of ``of``.
        baseline: what the run's equal-budget baseline passed by the same rule; ``None`` when
            the run measured none (then the detail says so: nothing is compared).
        baseline_kind: what the baseline is, in words, when it is not an equal-budget attack.
        candidates: reconstructions produced (default ``of``).
        quality: the quality figure (default the share recovered).
        error: mean squared error per coordinate on the [0, 1] scale, where that is measured.
    """
    if baseline is None:
        detail = "; ".join(filter(None, (detail, "the run measured no equal-budget baseline")))
    return AttackFinding(
        attack=attack,
        candidates=of if candidates is None else candidates,
        recovered=recovered,
        of=of,
        quality=recovered / of if quality is None and of else quality,
        quality_metric=rule,
        certainty="ground truth",
        baseline_recovered=baseline,
        baseline_kind=baseline_kind,
        error=error,
        detail=detail,
        certified=certified,
        unit=unit,
    )


def threshold_finding(
    attack: str,
    scores: Sequence[float],
    threshold: float,
    *,
    rule: str,
    baselines: Sequence[Sequence[float]] = (),
    above: bool = True,
    **kw: Any,
) -> AttackFinding:
    """:func:`scored_finding` from per-record scores: the records passing ``threshold``, against
    the best of the equal-budget ``baselines`` (per-record scores too) by the same rule."""
    base = [count_passing(b, threshold, above=above) for b in baselines]
    return scored_finding(
        attack,
        count_passing(scores, threshold, above=above),
        len(scores),
        rule=rule,
        baseline=max(base) if base else None,
        **kw,
    )


def _card_key(card: RiskCard) -> tuple[int, tuple[int, int, float, int, int], float]:
    """Riskier first: the level, then the strongest attack, then the weakest bound."""
    attack = _attack_key(card.attack) if card.attack else (-1, -1, 0.0, 0, 0)
    b = card.bound
    weakness = math.inf if b is None else (-b.value if b.kind == "lower" else b.value)
    return (_SEVERITY[card.level], attack, weakness)


def riskiest_card(releases: Mapping[str, Release]) -> RiskCard:
    """The card of the riskiest release of a run (``releases``: description -> its findings
    and bounds): the worst level, then the strongest attack, then the weakest bound. The
    release line says how many releases the run measured."""
    cards = [risk_card(name, found, bounds) for name, (found, bounds) in releases.items()]
    if not cards:
        return risk_card("no release was measured in this run", [], [])
    worst = max(cards, key=_card_key)
    if len(cards) == 1:
        return worst
    return replace(worst, release=f"{worst.release} (the riskiest of {len(cards)} releases)")
