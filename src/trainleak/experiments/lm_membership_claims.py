"""Config, rows and claims of ``lm-membership`` (seed 14, ADRA): pure functions of the rows, each
unit-tested on both sides.

Yin, Morris, Shmatikov, Min and Hajishirzi, "Learning to Detect Language Model Training Data via
Active Reconstruction", arXiv 2602.19020, 2026. The seed's claims: ADRA beats n-sampling, ADRA+
is at least ADRA, ADRA+ beats the best passive score (Min-K%++) by a clear margin. All are
decided on paired bootstrap intervals of AUROC differences on the same test candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field

from trainleak.attacks.language.passive import score_name
from trainleak.experiments.base import Claim, ClaimFn, ExperimentConfig, claim, not_tested


class LMMembershipConfig(ExperimentConfig):
    """Config of ``lm-membership`` (defaults: the tiny word-level GPT-2 on WikiText-2)."""

    n_members: int = Field(100, ge=4)
    n_nonmembers: int = Field(100, ge=4)
    n_calibration: int = Field(20, ge=4)
    words: int = Field(32, ge=8)
    vocab_size: int = Field(4000, ge=64)
    n_embd: int = Field(128, ge=8)
    n_layer: int = Field(2, ge=1)
    pretrain_steps: int = Field(300, ge=0)
    finetune_steps: int = Field(20, ge=1)
    member_share: float = Field(0.5, gt=0, le=1)
    finetune_lr: float = Field(1e-3, gt=0)
    rl_steps: int = Field(20, ge=1)
    rl_lr: float = Field(1e-3, gt=0)
    group: int = Field(8, ge=2)
    prompts_per_step: int = Field(32, ge=1)
    distractors: int = Field(3, ge=0)
    n_samples: int = Field(8, ge=1)
    max_new_tokens: int = Field(24, ge=1)
    eval_every: int = Field(5, ge=1)
    kl: float = Field(0.005, ge=0)
    minkpp_k: float = Field(0.2, gt=0, le=1)
    margin: float = Field(0.05, ge=0)
    tie_margin: float = Field(0.0, ge=0)
    n_boot: int = Field(1000, ge=100)
    level: float = Field(0.95, gt=0.5, lt=1)


@dataclass(frozen=True)
class MethodRow:
    """One membership score on the test candidates.

    ``chosen_step`` is the RL step picked on the calibration split (0 for methods without RL).
    """

    method: str
    family: str
    auroc: float
    auroc_lo: float
    auroc_hi: float
    tpr_at_1pct: float
    tpr_at_01pct: float
    chosen_step: int


@dataclass(frozen=True)
class StepRow:
    """An RL attack's AUROC after ``step`` GRPO steps (test and calibration candidates), and
    the mean reward of that step (NaN at step 0)."""

    method: str
    step: int
    test_auroc: float
    calibration_auroc: float
    mean_reward: float


@dataclass(frozen=True)
class ComparisonRow:
    """AUROC(a) - AUROC(b) on the same test candidates with its paired bootstrap interval."""

    a: str
    b: str
    diff: float
    diff_lo: float
    diff_hi: float


Row = MethodRow | StepRow | ComparisonRow


def _comparison(rows: Sequence[Row], a: str, b: str) -> ComparisonRow | None:
    found = [r for r in rows if isinstance(r, ComparisonRow) and r.a == a and r.b == b]
    return found[0] if found else None


def _evidence(c: ComparisonRow) -> dict[str, float]:
    return {
        "diff": round(c.diff, 4),
        "diff_lo": round(c.diff_lo, 4),
        "diff_hi": round(c.diff_hi, 4),
    }


def claim_adra_beats_n_sampling(rows: Sequence[Row], cfg: LMMembershipConfig) -> Claim:
    """ADRA's AUROC exceeds n-sampling's: the paired interval of the difference lies above 0."""
    text = "ADRA beats n-sampling (paired AUROC-difference interval above 0)"
    c = _comparison(rows, "adra", "n-sampling")
    if c is None:
        return not_tested(text, "no ADRA vs n-sampling comparison in this run")
    return claim(text, c.diff_lo > 0, **_evidence(c))


def claim_adra_plus_at_least_adra(rows: Sequence[Row], cfg: LMMembershipConfig) -> Claim:
    """ADRA+ is at least ADRA: the paired interval of AUROC(ADRA+) - AUROC(ADRA) is not
    entirely below ``-tie_margin`` (ADRA+ is not shown to be worse)."""
    text = "ADRA+ is at least ADRA (difference interval not entirely below 0)"
    c = _comparison(rows, "adra-plus", "adra")
    if c is None:
        return not_tested(text, "no ADRA+ vs ADRA comparison in this run")
    return claim(text, c.diff_hi >= -cfg.tie_margin, **_evidence(c))


def claim_adra_plus_beats_minkpp(rows: Sequence[Row], cfg: LMMembershipConfig) -> Claim:
    """ADRA+ beats Min-K%++ by a clear margin: the difference is at least ``margin`` and its
    paired interval lies above 0."""
    key = score_name("minkpp", cfg.minkpp_k)
    text = f"ADRA+ beats Min-K%++ (k={cfg.minkpp_k:g}) by >= {cfg.margin:g} AUROC, interval > 0"
    c = _comparison(rows, "adra-plus", key)
    if c is None:
        return not_tested(text, f"no ADRA+ vs {key} comparison in this run")
    return claim(text, c.diff >= cfg.margin and c.diff_lo > 0, **_evidence(c))


def claim_target_is_informative(rows: Sequence[Row], cfg: LMMembershipConfig) -> Claim:
    """The target is informative: the loss score's AUROC interval lies above 0.5 and below
    0.99 (members leave a trace, but the passive task is not solved)."""
    text = "the target is informative: loss AUROC interval inside (0.5, 0.99)"
    found = [r for r in rows if isinstance(r, MethodRow) and r.method == "loss"]
    if not found:
        return not_tested(text, "no loss score in this run")
    r = found[0]
    return claim(
        text,
        r.auroc_lo > 0.5 and r.auroc_hi < 0.99,
        auroc=round(r.auroc, 4),
        lo=round(r.auroc_lo, 4),
        hi=round(r.auroc_hi, 4),
    )


CLAIMS: tuple[ClaimFn, ...] = (
    claim_target_is_informative,
    claim_adra_beats_n_sampling,
    claim_adra_plus_at_least_adra,
    claim_adra_plus_beats_minkpp,
)
