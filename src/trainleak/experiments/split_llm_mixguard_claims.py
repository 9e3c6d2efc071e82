"""Config, rows and claims of ``split-llm-mixguard`` (seed 10): pure functions of the rows, each
unit-tested on both sides.

Chen et al., "The Art of Mixology: Mixup-based Obfuscation for Privacy-Preserving Split
Learning in Large Language Models", arXiv 2606.16801, 2026 (MIXGUARD). The abstract's claims:
utility comparable to non-split training, and stronger protection than existing split-learning
defenses, including against adaptive attacks. "Comparable" is read as within
``utility_gap`` accuracy points of non-split training (issue 13's target: 3); "stronger" as a
lower worst-case token recovery (over all attacks) than every other defense setting that keeps
at least MIXGUARD's accuracy (docs/decisions.md). One seed: numbers, not intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from trainleak.experiments.base import Claim, ClaimFn, ExperimentConfig, claim, not_tested

AttackName = Literal["split-lm-inverter", "split-lm-adaptive-inverter", "split-lm-bisr"]
ATTACKS: tuple[AttackName, ...] = (
    "split-lm-inverter",
    "split-lm-adaptive-inverter",
    "split-lm-bisr",
)
ADAPTIVE = "split-lm-adaptive-inverter"


class SplitLLMMixGuardConfig(ExperimentConfig):
    """Config of ``split-llm-mixguard`` (defaults: the tiny model, about 10 minutes on 2
    cores)."""

    n_private: int = Field(600, ge=16)
    n_test: int = Field(300, ge=8)
    n_public_records: int = Field(600, ge=40)
    n_wiki: int = Field(600, ge=0)
    pool_size: int = Field(100, ge=2, le=300)
    length: int = Field(24, ge=8)
    n_layer: int = Field(4, ge=2)
    n_embd: int = Field(64, ge=8)
    pretrain_steps: int = Field(300, ge=1)
    bottom_end: int = Field(1, ge=1)
    top_start: int = Field(3, ge=2)
    steps: int = Field(
        900,
        ge=1,
        description="training steps of every setting and reference (was 300: the defended "
        "settings had not converged, docs/decisions.md)",
    )
    batch_size: int = Field(16, ge=2)
    lr_server: float = Field(1e-3, gt=0)
    lr_client: float = Field(3e-3, gt=0)
    lora_r: int = Field(0, ge=0, description="0: full fine-tuning of the trunk; >0: LoRA rank")
    record_rows: int = Field(128, ge=8)
    sigmas: list[float] = Field(default_factory=lambda: [0.5, 1.0, 2.0, 4.0])
    n_insert: int = Field(4, ge=0)
    n_aux: int = Field(2, ge=1)
    signs: bool = True
    lam0_low: float = Field(
        0.2,
        gt=0,
        le=1,
        description="lower end of the private row's mixing weight (was 0.6: issue 13 fourth "
        "pass, docs/decisions.md)",
    )
    lam0_high: float = Field(0.4, gt=0, le=1, description="upper end (was 0.8)")
    mix: Literal["vector", "matrix"] = "vector"
    grad_noise: float = Field(1.0, ge=0)
    calib_steps: int = Field(100, ge=0)
    attacks: list[AttackName] = Field(default_factory=lambda: list(ATTACKS))
    inverter_steps: int = Field(500, ge=1)
    bisr_top_k: int = Field(64, ge=1)
    utility_gap: float = Field(3.0, ge=0, description="accuracy points")
    chance_factor: float = Field(2.0, ge=1)
    real_attack: float = Field(0.9, gt=0, le=1)


@dataclass(frozen=True)
class UtilityRow:
    """Test accuracy of one setting (``kind`` ``"nonsplit"`` and ``"clientonly"`` for the
    references: the unsplit model, and the client's top on its own bottom output)."""

    setting: str
    kind: str
    sigma: float
    accuracy: float
    residual: float


@dataclass(frozen=True)
class AttackRow:
    """One attack on one setting's transcript, beside the positional-prior baseline and slot
    chance (``1 / pool_size``)."""

    setting: str
    kind: str
    sigma: float
    attack: str
    token_recovery: float
    slot_recovery: float
    rouge_l: float
    baseline_token: float
    baseline_slot: float
    baseline_rouge: float
    chance: float
    slots: int = 0


Row = UtilityRow | AttackRow


def _acc(rows: Sequence[Row]) -> dict[str, float]:
    return {r.setting: r.accuracy for r in rows if isinstance(r, UtilityRow)}


def _attacks(rows: Sequence[Row], setting: str, only: str | None = None) -> list[AttackRow]:
    return [
        r
        for r in rows
        if isinstance(r, AttackRow) and r.setting == setting and (only is None or r.attack == only)
    ]


def _worst(rows: Sequence[Row], setting: str, metric: str, only: str | None = None) -> float:
    vals = [getattr(r, metric) for r in _attacks(rows, setting, only)]
    return max(vals) if vals else float("nan")


def _kind_settings(rows: Sequence[Row], kind: str) -> list[str]:
    return [r.setting for r in rows if isinstance(r, UtilityRow) and r.kind == kind]


def claim_attack_is_real(rows: Sequence[Row], cfg: SplitLLMMixGuardConfig) -> Claim:
    text = (
        f"Undefended, the strongest attack recovers at least {cfg.real_attack:.0%} of tokens and "
        "every attack beats the positional-prior baseline"
    )
    att = _attacks(rows, "none")
    if not att:
        return not_tested(text, "no undefended attack row")
    best = max(r.token_recovery for r in att)
    beats = {r.attack: r.token_recovery > r.baseline_token for r in att}
    return claim(
        text,
        best >= cfg.real_attack and all(beats.values()),
        best=best,
        baseline=att[0].baseline_token,
        beats=beats,
    )


def claim_utility(rows: Sequence[Row], cfg: SplitLLMMixGuardConfig) -> Claim:
    text = f"MIXGUARD keeps task accuracy within {cfg.utility_gap:g} points of non-split training"
    acc = _acc(rows)
    if "mixguard" not in acc or "non-split" not in acc:
        return not_tested(text, "needs the mixguard and non-split rows")
    gap = 100 * (acc["non-split"] - acc["mixguard"])
    alone = acc.get("client-only", float("nan"))
    return claim(
        text,
        gap <= cfg.utility_gap,
        gap_points=gap,
        mixguard=acc["mixguard"],
        nonsplit=acc["non-split"],
        client_only=alone,
        over_client_only_points=100 * (acc["mixguard"] - alone),
    )


def claim_server_gain_kept(rows: Sequence[Row], cfg: SplitLLMMixGuardConfig) -> Claim:
    """The utility claim read against the client-only reference: where the server helps
    (non-split beats the client alone by more than ``utility_gap`` points), MIXGUARD keeps at
    least half of that gain. Not tested on a task the client solves alone, where no defense's
    accuracy can show whether the server's computation survives the obfuscation."""
    text = (
        "Where the server helps (non-split above the client alone), MIXGUARD keeps at least "
        "half of the server's gain"
    )
    acc = _acc(rows)
    if not {"mixguard", "non-split", "client-only"} <= set(acc):
        return not_tested(text, "needs the mixguard, non-split and client-only rows")
    gain = 100 * (acc["non-split"] - acc["client-only"])
    if gain <= cfg.utility_gap:
        return not_tested(
            text,
            f"the task does not need the server: the client alone reaches "
            f"{acc['client-only']:.3f} against non-split {acc['non-split']:.3f}",
        )
    kept = 100 * (acc["mixguard"] - acc["client-only"])
    return claim(
        text, kept >= gain / 2, server_gain_points=gain, kept_points=kept, share=kept / gain
    )


def claim_slots_near_chance(rows: Sequence[Row], cfg: SplitLLMMixGuardConfig) -> Claim:
    text = (
        f"Under MIXGUARD private-slot recovery is at most {cfg.chance_factor:g}x chance under "
        "every attack, the adaptive one included"
    )
    att = _attacks(rows, "mixguard")
    if not att:
        return not_tested(text, "no MIXGUARD attack row")
    limit = cfg.chance_factor * att[0].chance
    per = {r.attack: r.slot_recovery for r in att}
    return claim(text, max(per.values()) <= limit, limit=limit, per_attack=per)


def _better(rows: Sequence[Row], only: str | None) -> tuple[bool, dict[str, object]] | None:
    acc = _acc(rows)
    if "mixguard" not in acc:
        return None
    mine = _worst(rows, "mixguard", "token_recovery", only)
    rivals = {
        s: _worst(rows, s, "token_recovery", only)
        for s, a in acc.items()
        if s not in ("mixguard", "non-split", "none")
        and a >= acc["mixguard"]
        and _attacks(rows, s, only)
    }
    if not rivals or mine != mine:
        return None
    return all(mine < v for v in rivals.values()), {"mixguard": mine, "rivals": rivals}


def claim_protects_better(rows: Sequence[Row], cfg: SplitLLMMixGuardConfig) -> Claim:
    text = (
        "MIXGUARD's worst-case token recovery (all attacks) is below that of every other "
        "defense setting with at least its accuracy"
    )
    out = _better(rows, None)
    if out is None:
        return not_tested(text, "no other defense setting reaches MIXGUARD's accuracy")
    return claim(text, out[0], **out[1])


def claim_protects_better_adaptive(rows: Sequence[Row], cfg: SplitLLMMixGuardConfig) -> Claim:
    text = (
        "Against the adaptive inverter, MIXGUARD's token recovery is below that of every other "
        "defense setting with at least its accuracy"
    )
    out = _better(rows, ADAPTIVE)
    if out is None:
        return not_tested(text, "no adaptive rows, or no rival reaches MIXGUARD's accuracy")
    return claim(text, out[0], **out[1])


def noise_to_match(rows: Sequence[Row]) -> tuple[float, float] | None:
    """The smallest noise level whose worst-case token recovery is at most MIXGUARD's, and its
    accuracy; ``None`` when no noise level in the sweep matches."""
    acc = _acc(rows)
    target = _worst(rows, "mixguard", "token_recovery")
    noise = sorted(
        (r.sigma, r.setting) for r in rows if isinstance(r, UtilityRow) and r.kind == "noise"
    )
    for sigma, s in noise:
        if _worst(rows, s, "token_recovery") <= target:
            return sigma, acc[s]
    return None


def claim_noise_costs_more(rows: Sequence[Row], cfg: SplitLLMMixGuardConfig) -> Claim:
    text = (
        "To match MIXGUARD's worst-case token recovery the Gaussian baseline needs a noise "
        "level that costs more accuracy than MIXGUARD"
    )
    acc = _acc(rows)
    if "mixguard" not in acc or not _kind_settings(rows, "noise"):
        return not_tested(text, "needs MIXGUARD and noise rows")
    found = noise_to_match(rows)
    if found is None:
        sigmas = [r.sigma for r in rows if isinstance(r, UtilityRow) and r.kind == "noise"]
        return claim(
            text,
            True,
            matched=False,
            largest_sigma=max(sigmas),
            note="no noise level in the sweep matches MIXGUARD's privacy",
        )
    sigma, noise_acc = found
    return claim(
        text,
        noise_acc < acc["mixguard"],
        matched=True,
        sigma=sigma,
        noise_accuracy=noise_acc,
        mixguard_accuracy=acc["mixguard"],
    )


CLAIMS: tuple[ClaimFn, ...] = (
    claim_attack_is_real,
    claim_utility,
    claim_server_gain_kept,
    claim_slots_near_chance,
    claim_protects_better,
    claim_protects_better_adaptive,
    claim_noise_costs_more,
)
