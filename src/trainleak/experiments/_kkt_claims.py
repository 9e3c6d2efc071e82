"""Rows and claims of ``kkt-reconstruction``: each claim a pure function of the rows.

Rows: one :class:`RunRow` per seed (training and attack diagnostics) and one :class:`ScoreRow`
per (seed, method). Claims over seeds compare intervals (:func:`._kkt_common.exceeds`): a
one-sided paired t bound over seeds, or with one seed non-overlapping Wilson intervals over
the training images.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainleak.experiments._kkt_common import ScoreRow, exceeds
from trainleak.experiments.base import Claim, ClaimFn, claim, not_tested


@dataclass(frozen=True)
class RunRow:
    """Training and attack diagnostics of one seed."""

    seed: int
    n_train: int
    final_loss: float
    min_margin: float
    train_seconds: float
    attack_seconds: float
    kkt_loss_final: float
    untrained_kkt_loss_final: float | None


def _scores(rows: Sequence[object]) -> list[ScoreRow]:
    return [r for r in rows if isinstance(r, ScoreRow)]


def paired(
    rows: Sequence[ScoreRow], key: str, roles: frozenset[str]
) -> tuple[list[float], list[float], list[str]]:
    """Per seed: the attack's ``key``, the best ``key`` among rows of ``roles``, and its method.

    Only seeds that have an attack row and at least one row of ``roles`` are kept.
    """
    att_vals, base_vals, names = [], [], []
    for seed in sorted({r.seed for r in rows}):
        mine = [r for r in rows if r.seed == seed]
        att = [r for r in mine if r.role == "attack"]
        others = [r for r in mine if r.role in roles]
        if att and others:
            best = max(others, key=lambda r: (getattr(r, key), r.median_ssim))
            att_vals.append(float(getattr(att[0], key)))
            base_vals.append(float(getattr(best, key)))
            names.append(best.method)
    return att_vals, base_vals, names


def _beats(text: str, key: str, roles: frozenset[str]) -> ClaimFn:
    """A claim: the attack's ``key`` exceeds the best of ``roles`` (intervals over seeds)."""

    def fn(rows: Sequence[object], config: object) -> Claim:
        scores = _scores(rows)
        att, base, names = paired(scores, key, roles)
        if not att:
            return not_tested(text, f"no attack and {sorted(roles)} rows on a common seed")
        holds, test = exceeds(att, base, scores[0].n)
        return claim(
            text, holds, attack=att, best_baseline=base, best_baseline_method=names, **test
        )

    fn.__name__ = f"claim_beats_{'_'.join(sorted(roles))}_{key}"
    return fn


def claim_margin(rows: Sequence[object], config: object) -> Claim:
    """Precondition: every seed's checkpoint reached the margin regime."""
    text = (
        "Precondition: training reached the margin regime (every training point classified "
        "correctly with margin >= 1) in every seed"
    )
    runs = [r for r in rows if isinstance(r, RunRow)]
    if not runs:
        return not_tested(text, "no training rows")
    margins = [r.min_margin for r in runs]
    return claim(
        text, min(margins) >= 1.0, min_margin=margins, final_loss=[r.final_loss for r in runs]
    )


_EQUAL = frozenset({"baseline", "control"})
_ORACLE = frozenset({"oracle"})
_EQUAL_TEXT = (
    "every equal-budget baseline (as many uniform random images, public held-out images, or "
    "perturbations of the public mean, and the attack on the untrained network; same "
    "best-match selection)"
)
_ORACLE_TEXT = (
    "the oracle class-mean reference (means of held-out data of every original class: "
    "knowledge the attacker does not have)"
)

claim_beats_baselines_04 = _beats(
    f"KKT reconstruction recovers more training images at SSIM >= 0.4 than {_EQUAL_TEXT}",
    "ssim_04",
    _EQUAL,
)
claim_beats_baselines_06 = _beats(
    f"KKT reconstruction recovers more training images at SSIM >= 0.6 than {_EQUAL_TEXT}",
    "ssim_06",
    _EQUAL,
)
claim_beats_oracle_04 = _beats(
    f"KKT reconstruction recovers more training images at SSIM >= 0.4 than {_ORACLE_TEXT}",
    "ssim_04",
    _ORACLE,
)
claim_beats_oracle_06 = _beats(
    f"KKT reconstruction recovers more training images at SSIM >= 0.6 than {_ORACLE_TEXT}",
    "ssim_06",
    _ORACLE,
)


def claim_leak_from_training(rows: Sequence[object], config: object) -> Claim:
    """The trained release beats the untrained control on SSIM >= 0.4 and on specificity."""
    text = (
        "The leak comes from training: the same attack on the untrained network of the same "
        "shape recovers fewer images at SSIM >= 0.4 and fewer specific reconstructions"
    )
    scores = _scores(rows)
    control = frozenset({"control"})
    a04, c04, _ = paired(scores, "ssim_04", control)
    asp, csp, _ = paired(scores, "specific", control)
    if not a04:
        return not_tested(text, "no untrained-control rows (untrained_control=false)")
    ok04, t04 = exceeds(a04, c04, scores[0].n)
    oksp, tsp = exceeds(asp, csp, scores[0].n)
    return claim(
        text,
        ok04 and oksp,
        attack_ssim_04=a04,
        untrained_ssim_04=c04,
        attack_specific=asp,
        untrained_specific=csp,
        ssim_04_test=t04,
        specific_test=tsp,
    )


claim_sample_specific = _beats(
    "Reconstructions carry sample-specific structure: more training images get a candidate "
    "closer to them than to every held-out image of the same class (train / held-out distance "
    "ratio < 1) than with any baseline, the oracle class means included",
    "specific",
    frozenset({"baseline", "control", "oracle"}),
)

CLAIMS: tuple[Callable[[Sequence[object], object], Claim], ...] = (
    claim_margin,
    claim_beats_baselines_04,
    claim_beats_baselines_06,
    claim_beats_oracle_04,
    claim_beats_oracle_06,
    claim_leak_from_training,
    claim_sample_specific,
)
