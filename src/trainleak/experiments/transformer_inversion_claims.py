"""Config, rows and claims of ``transformer-gradient-inversion`` (seed 9, TIGER vs DAGER), as
pure functions of the rows. One seed: each claim compares the attacks on the same releases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from trainleak.experiments.base import Claim, ClaimFn, ExperimentConfig, claim, not_tested

Part = Literal["noise", "length", "batch", "dp"]
SUBSPACE = ("dager", "tiger")


class TransformerInversionConfig(ExperimentConfig):
    """Config of ``transformer-gradient-inversion`` (tiny random models by default)."""

    sentences: int = Field(200, ge=20)
    vocab: int = Field(1000, ge=50)
    width: int = Field(96, ge=16)
    models: list[Literal["encoder", "decoder"]] = Field(default=["encoder", "decoder"])
    batch: int = Field(4, ge=1)
    length: int = Field(12, ge=4)
    noises: list[float] = Field(default=[0.0, 1e-4, 1e-3, 1e-2])
    lengths: list[int] = Field(default=[6, 9, 12])
    batches: list[int] = Field(default=[1, 2, 4])
    dp_clip: float = Field(1.0, gt=0)
    dp_noise_multipliers: list[float] = Field(default=[1e-4, 1e-3])
    tiger_steps: int = Field(150, ge=0)
    matching_steps: int = Field(100, ge=0)
    exact_rate: float = Field(0.95, ge=0, le=1)
    rouge_floor: float = Field(0.5, ge=0, le=1)


@dataclass(frozen=True)
class Row:
    """One attack on one release: ``part`` names the sweep, ``noise`` is x RMS (0 for DP-SGD
    cells, whose noise multiplier is ``dp``); ``combinations`` is the product of DAGER's
    layer-1 candidate counts (what an exhaustive encoder search enumerates)."""

    model: str
    part: Part
    batch: int
    length: int
    width: int
    noise: float
    dp: float
    attack: str
    exact_rate: float
    token_accuracy: float
    rouge1: float
    rouge2: float
    seconds: float
    certified: int
    combinations: float


def claim_exact_noiseless(rows: Sequence[Row], cfg: TransformerInversionConfig) -> Claim:
    """Both subspace attacks recover every noiseless batch exactly when ``B n`` < width."""
    text = f"DAGER and TIGER are exact (rate >= {cfg.exact_rate}) without noise when B*n < width"
    sel = [
        r
        for r in rows
        if r.noise == 0 and r.part != "dp" and r.attack in SUBSPACE and r.batch * r.length < r.width
    ]
    if not sel:
        return not_tested(text, "no noiseless cell with B*n below the width")
    worst = min(sel, key=lambda r: r.exact_rate)
    return claim(
        text,
        worst.exact_rate >= cfg.exact_rate,
        cells=len(sel),
        worst=f"{worst.model} {worst.attack} B={worst.batch} n={worst.length}: "
        f"{worst.exact_rate:.2f}",
    )


def _pair(rows: Sequence[Row], part: Part, model: str, key: float) -> dict[str, Row]:
    val = (lambda r: r.dp) if part == "dp" else (lambda r: r.noise)
    return {r.attack: r for r in rows if r.part == part and r.model == model and val(r) == key}


def claim_graceful(rows: Sequence[Row], cfg: TransformerInversionConfig) -> Claim:
    """On every model, at the first noise level where DAGER's ROUGE-1 falls below the floor,
    TIGER's stays at or above it."""
    text = (
        f"TIGER keeps ROUGE-1 >= {cfg.rouge_floor} at the first noise level where DAGER's "
        "drops below it (encoder and decoder)"
    )
    evidence, verdicts = {}, []
    for model in sorted({r.model for r in rows if r.part == "noise"}):
        for level in sorted({r.noise for r in rows if r.part == "noise" and r.model == model}):
            pair = _pair(rows, "noise", model, level)
            if "dager" in pair and "tiger" in pair and pair["dager"].rouge1 < cfg.rouge_floor:
                verdicts.append(pair["tiger"].rouge1 >= cfg.rouge_floor)
                evidence[model] = (
                    f"noise {level:g}: DAGER {pair['dager'].rouge1:.2f}, "
                    f"TIGER {pair['tiger'].rouge1:.2f}"
                )
                break
    if not verdicts:
        return not_tested(text, "DAGER never dropped below the floor in the noise sweep")
    return claim(text, all(verdicts), **evidence)


def claim_runtime_length(rows: Sequence[Row], cfg: TransformerInversionConfig) -> Claim:
    """TIGER's encoder runtime grows at most quadratically in the length over the length sweep,
    while the exhaustive span search it replaces enumerates ``combinations`` sequences."""
    text = "TIGER's encoder runtime grows at most quadratically with the sequence length"
    sel = sorted(
        (r for r in rows if r.part == "length" and r.model == "encoder" and r.attack == "tiger"),
        key=lambda r: r.length,
    )
    if len(sel) < 2:
        return not_tested(text, "fewer than two lengths for the encoder")
    lo, hi = sel[0], sel[-1]
    growth = hi.seconds / max(lo.seconds, 1e-9)
    allowed = (hi.length / lo.length) ** 2
    dager = {
        r.length: r.combinations
        for r in rows
        if r.part == "length" and r.model == "encoder" and r.attack == "dager"
    }
    return claim(
        text,
        growth <= allowed,
        tiger_growth=round(growth, 2),
        quadratic=round(allowed, 2),
        exhaustive_combinations=dager,
    )


def claim_dp(rows: Sequence[Row], cfg: TransformerInversionConfig) -> Claim:
    """At some DP-SGD noise multiplier, TIGER reaches the ROUGE-1 floor on every model while
    DAGER stays below it."""
    text = (
        f"At a DP-SGD noise level where DAGER's ROUGE-1 is below {cfg.rouge_floor}, TIGER's is "
        "at or above it (encoder and decoder)"
    )
    evidence: dict[str, str] = {}
    levels = sorted({r.dp for r in rows if r.part == "dp"})
    models = sorted({r.model for r in rows if r.part == "dp"})
    holds_at = []
    for level in levels:
        ok = []
        for model in models:
            pair = _pair(rows, "dp", model, level)
            if "dager" in pair and "tiger" in pair:
                d, t = pair["dager"].rouge1, pair["tiger"].rouge1
                ok.append(t >= cfg.rouge_floor > d)
                evidence[f"{model} z={level:g}"] = f"DAGER {d:.2f}, TIGER {t:.2f}"
        if len(ok) == len(models) and all(ok):  # every model, each with both attacks
            holds_at.append(level)
    if not evidence:
        return not_tested(text, "no DP-SGD cells")
    return claim(text, bool(holds_at), levels_where_it_holds=holds_at, **evidence)


CLAIMS: tuple[ClaimFn, ...] = (
    claim_exact_noiseless,
    claim_graceful,
    claim_runtime_length,
    claim_dp,
)
