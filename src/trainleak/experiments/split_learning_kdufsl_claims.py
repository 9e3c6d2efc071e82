"""Config, rows and claims of ``split-learning-kdufsl`` (seed 15): pure functions of the rows,
each unit-tested on both sides.

Zaland, Mistry and Bhuyan, "Guarding the Middle: Protecting Intermediate Representations in
Federated Split Learning", arXiv 2602.17614, 2026 (KD-UFSL). The seed's claims: with DP plus
MDAV the inversion MSE rises by up to 50 % and SSIM falls by up to 40 % relative to vanilla
UFSL, at an accuracy cost of about 2 to 2.5 points; the effect is monotone in k and sigma.
"up to" is read as "the strongest KD setting reaches about that much": a band of
``effect_band`` (relative) around the stated number (``docs/decisions.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from trainleak.experiments.base import Claim, ClaimFn, ExperimentConfig, claim, not_tested

Dataset = Literal["digits", "mnist", "cifar10"]
AttackName = Literal["split-inverse-network", "split-fora", "split-whitebox"]
ATTACKS: tuple[AttackName, ...] = ("split-inverse-network", "split-fora", "split-whitebox")
DEFAULT_DATASETS: tuple[Dataset, ...] = ("mnist", "cifar10")


class SplitLearningKDUFSLConfig(ExperimentConfig):
    """Config of ``split-learning-kdufsl``."""

    datasets: list[Dataset] = Field(default_factory=lambda: list(DEFAULT_DATASETS))
    n_clients: int = Field(5, ge=1)
    per_client: int = Field(200, ge=8)
    n_aux: int = Field(500, ge=8)
    n_test: int = Field(500, ge=8)
    rounds: int = Field(10, ge=1)
    local_epochs: int = Field(1, ge=1)
    batch_size: int = Field(64, ge=8)
    lrs: dict[str, float] = Field(
        default_factory=lambda: {"digits": 0.05, "mnist": 0.05, "cifar10": 0.02}
    )
    sigmas: list[float] = Field(default_factory=lambda: [0.02, 0.05, 0.1])
    ks: list[int] = Field(default_factory=lambda: [2, 4, 8])
    # None: exact MDAV; m: MDAV groups formed on an m-dim principal subspace each client
    # tracks (the fast variant the MDAV cost benchmark times; SmashedDefenseSpec.sketch)
    mdav_sketch: int | None = Field(None, ge=1)
    mdav_sketch_refresh: int = Field(16, ge=1)  # batches between the tracking steps
    kd_sigma: float = Field(0.05, gt=0)
    clips: dict[str, float] = Field(
        default_factory=lambda: {"digits": 4.0, "mnist": 8.0, "cifar10": 5.5}
    )
    delta: float = Field(1e-5, gt=0, lt=1)
    attacks: list[AttackName] = Field(default_factory=lambda: list(ATTACKS))
    claim_attack: AttackName = "split-inverse-network"
    max_rows: int = Field(128, ge=1)
    decoder_steps: int = Field(300, ge=1)
    substitute_steps: int = Field(400, ge=1)
    whitebox_steps: int = Field(150, ge=1)
    accuracy: Literal["defended", "clean"] = "defended"
    mse_increase: float = Field(0.5, gt=0)
    ssim_decrease: float = Field(0.4, gt=0, lt=1)
    effect_band: float = Field(0.5, ge=0, lt=1)
    accuracy_cost: float = Field(2.5, ge=0)
    accuracy_slack: float = Field(1.0, ge=0)
    monotone_slack: float = Field(0.0, ge=0)


@dataclass(frozen=True)
class UtilityRow:
    """One trained setting: test accuracy with clean and defended inference, the smallest
    multiplicity of a transmitted row within its step, and the DP epsilon (NaN without DP)."""

    dataset: str
    setting: str
    kind: str
    k: int
    sigma: float
    acc_clean: float
    acc_defended: float
    min_multiplicity: int
    epsilon: float


@dataclass(frozen=True)
class AttackRow:
    """One attack on one setting's transcript, beside the auxiliary-mean baseline."""

    dataset: str
    setting: str
    kind: str
    k: int
    sigma: float
    attack: str
    adaptive: bool
    mse: float
    ssim: float
    baseline_mse: float
    baseline_ssim: float
    n: int


Row = UtilityRow | AttackRow


def _attack_rows(
    rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig, dataset: str, adaptive: bool = False
) -> list[AttackRow]:
    return [
        r
        for r in rows
        if isinstance(r, AttackRow)
        and r.dataset == dataset
        and r.attack == cfg.claim_attack
        and r.adaptive == adaptive
    ]


def _datasets(rows: Sequence[Row]) -> list[str]:
    return sorted({r.dataset for r in rows})


def _vanilla(rows: list[AttackRow]) -> AttackRow | None:
    return next((r for r in rows if r.kind == "vanilla"), None)


def claim_attack_is_real(rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig) -> Claim:
    text = "Undefended, the inversion beats the auxiliary-mean image (MSE and SSIM)"
    ev = {}
    for ds in _datasets(rows):
        v = _vanilla(_attack_rows(rows, cfg, ds))
        if v is not None:
            ev[ds] = {
                "mse": v.mse,
                "base_mse": v.baseline_mse,
                "ssim": v.ssim,
                "base_ssim": v.baseline_ssim,
            }
    if not ev:
        return not_tested(text, "no undefended attack row")
    ok = all(e["mse"] < e["base_mse"] and e["ssim"] > e["base_ssim"] for e in ev.values())
    return claim(text, ok, **ev)


def _effect(rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig, metric: str) -> dict[str, float]:
    """Per data set, the largest relative change of ``metric`` over the KD settings vs
    vanilla (an MSE increase, or an SSIM decrease), standard claim attack."""
    out = {}
    for ds in _datasets(rows):
        ar = _attack_rows(rows, cfg, ds)
        v, kd = _vanilla(ar), [r for r in ar if r.kind == "kd"]
        if v is None or not kd:
            continue
        if metric == "mse":
            out[ds] = max(r.mse / v.mse - 1.0 for r in kd)
        else:
            out[ds] = max(1.0 - r.ssim / v.ssim for r in kd)
    return out


def _band_claim(text: str, eff: dict[str, float], target: float, band: float) -> Claim:
    if not eff:
        return not_tested(text, "no vanilla and KD attack rows")
    lo, hi = target * (1 - band), target * (1 + band)
    ok = all(lo <= e <= hi for e in eff.values())
    return claim(text, ok, largest_change=eff, band=(lo, hi))


def claim_mse_rises(rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig) -> Claim:
    text = f"DP + MDAV raises the inversion MSE by up to {cfg.mse_increase:.0%} vs vanilla"
    return _band_claim(text, _effect(rows, cfg, "mse"), cfg.mse_increase, cfg.effect_band)


def claim_ssim_falls(rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig) -> Claim:
    text = f"DP + MDAV lowers the inversion SSIM by up to {cfg.ssim_decrease:.0%} vs vanilla"
    return _band_claim(text, _effect(rows, cfg, "ssim"), cfg.ssim_decrease, cfg.effect_band)


def claim_accuracy_cost(rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig) -> Claim:
    text = (
        f"DP + MDAV costs about {cfg.accuracy_cost:g} accuracy points at most "
        f"({cfg.accuracy} inference)"
    )
    cost = {}
    for ds in _datasets(rows):
        ur = [r for r in rows if isinstance(r, UtilityRow) and r.dataset == ds]
        v = next((r for r in ur if r.kind == "vanilla"), None)
        kd = [r for r in ur if r.kind == "kd"]
        if v is None or not kd:
            continue
        acc = (lambda r: r.acc_defended) if cfg.accuracy == "defended" else (lambda r: r.acc_clean)
        cost[ds] = max(100 * (acc(v) - acc(r)) for r in kd)
    if not cost:
        return not_tested(text, "no vanilla and KD utility rows")
    ok = all(c <= cfg.accuracy_cost + cfg.accuracy_slack for c in cost.values())
    return claim(text, ok, largest_cost_points=cost, limit=cfg.accuracy_cost + cfg.accuracy_slack)


def _monotone(seq: list[AttackRow], key: str, slack: float) -> bool:
    seq = sorted(seq, key=lambda r: getattr(r, key))
    mse_ok = all(b.mse >= a.mse - slack * a.mse for a, b in zip(seq, seq[1:]))
    ssim_ok = all(b.ssim <= a.ssim + slack * abs(a.ssim) for a, b in zip(seq, seq[1:]))
    return mse_ok and ssim_ok


def claim_monotone_k(rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig) -> Claim:
    text = "The protection grows with k: MSE non-decreasing, SSIM non-increasing (MDAV and KD)"
    ev, ok = {}, True
    for ds in _datasets(rows):
        ar = _attack_rows(rows, cfg, ds)
        for kind in ("mdav", "kd"):
            seq = [r for r in ar if r.kind == kind]
            if len(seq) >= 2:
                good = _monotone(seq, "k", cfg.monotone_slack)
                ok &= good
                ev[f"{ds}/{kind}"] = {r.k: (round(r.mse, 5), round(r.ssim, 4)) for r in seq}
    if not ev:
        return not_tested(text, "fewer than two k values")
    return claim(text, ok, **ev)


def claim_monotone_sigma(rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig) -> Claim:
    text = "The protection grows with sigma: MSE non-decreasing, SSIM non-increasing (DP)"
    ev, ok = {}, True
    for ds in _datasets(rows):
        seq = [r for r in _attack_rows(rows, cfg, ds) if r.kind == "dp"]
        if len(seq) >= 2:
            ok &= _monotone(seq, "sigma", cfg.monotone_slack)
            ev[ds] = {r.sigma: (round(r.mse, 5), round(r.ssim, 4)) for r in seq}
    if not ev:
        return not_tested(text, "fewer than two sigma values")
    return claim(text, ok, **ev)


def claim_k_anonymous(rows: Sequence[Row], cfg: SplitLearningKDUFSLConfig) -> Claim:
    text = "Every transmitted vector occurs at least k times within its step (checked exactly)"
    ur = [r for r in rows if isinstance(r, UtilityRow) and r.k > 1]
    if not ur:
        return not_tested(text, "no microaggregated setting")
    bad = {f"{r.dataset}/{r.setting}": r.min_multiplicity for r in ur if r.min_multiplicity < r.k}
    return claim(text, not bad, checked=len(ur), violations=bad)


def epsilon_or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


CLAIMS: tuple[ClaimFn, ...] = (
    claim_attack_is_real,
    claim_mse_rises,
    claim_ssim_falls,
    claim_accuracy_cost,
    claim_monotone_k,
    claim_monotone_sigma,
    claim_k_anonymous,
)
