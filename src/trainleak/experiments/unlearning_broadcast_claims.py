"""Rows and claims of ``unlearning-broadcast-leak`` (seed 6): pure functions of the measurements.

Each claim is ``claim_fn(rows, config) -> Claim``; the unit tests feed them rows where they
must hold and rows where they must fail.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field

from trainleak.experiments.base import Claim, ClaimFn, ExperimentConfig, claim, not_tested
from trainleak.experiments.risk import Release, RiskCard, riskiest_card, scored_finding, share_count


class UnlearningBroadcastConfig(ExperimentConfig):
    """Config of ``unlearning-broadcast-leak`` (defaults sized for ~1 CPU core, < 3 min)."""

    n_server: int = Field(1000, ge=20)
    n_own: int = Field(300, ge=10)
    mnist_n_own: int = Field(
        1000, ge=10, description="own records on MNIST: raw pixels need more than 784 to span"
    )
    deletions: int = Field(25, ge=1)
    mnist_deletions: int = Field(4, ge=0)
    precisions: list[str] = ["float64", "float32", "float16", "decimals:3"]
    concurrency: list[float] = [0.1, 0.3]
    relu_dim: int = Field(64, ge=2)
    mnist_relu_dim: int = Field(256, ge=2)
    lam: float = Field(1.0, gt=0)
    data_dir: str | None = None


N_CLASSES = 10
"""Classes of digits and MNIST: one unrestricted summary carries ``c = 10`` directions."""


@dataclass(frozen=True)
class SettingRow:
    """The attack over ``deletions`` isolated honest deletions in one protocol setting.

    ``label_acc``, ``exact_rate`` and ``certified`` are fractions of the deletions; cosines
    are of recovered against true features; ``state_err`` is the median relative error of the
    identified Gram matrix; ``rank_min`` the smallest rank of the probe footprint ``D``.
    """

    setting: str
    probe: str
    precision: str
    diversity: str
    concurrent: float
    d: int
    deletions: int
    label_acc: float
    exact_rate: float
    cos_mean: float
    cos_min: float
    state_err: float
    rank_min: int
    probes: float
    certified: float
    certified_wrong: int
    reinsert_err: float


@dataclass(frozen=True)
class DetectionRow:
    """Server-side flag rates of probe messages against honest batches."""

    unrestricted_flag_rate: float
    own_data_flag_rate: float
    honest_false_flag_rate: float


Row = SettingRow | DetectionRow


def settings_of(rows: Sequence[Row]) -> list[SettingRow]:
    return [r for r in rows if isinstance(r, SettingRow)]


def clean_settings(rows: Sequence[Row]) -> list[SettingRow]:
    """Full-diversity settings without concurrency at float64."""
    return [
        r
        for r in settings_of(rows)
        if r.precision == "float64" and r.diversity == "all" and r.concurrent == 0
    ]


def digits_raw(rows: Sequence[Row]) -> list[SettingRow]:
    """Digits, raw features, full diversity, no concurrency (the precision sweep)."""
    return [
        r
        for r in settings_of(rows)
        if r.setting == "digits/raw" and r.diversity == "all" and r.concurrent == 0
    ]


def claim_exact_float64(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> Claim:
    """At float64 every isolated deletion is recovered (label and features), both probes."""
    text = (
        "float64 broadcasts: exact label recovery for every tested isolated deletion with both "
        "probe types, feature cosine above 0.999"
    )
    clean = clean_settings(rows)
    probes = sorted({r.probe for r in clean})
    if probes != ["own_data", "unrestricted"]:
        return not_tested(text, f"float64 settings ran only the probes {probes}")
    return claim(
        text,
        all(r.label_acc == 1.0 and r.cos_min > 0.999 for r in clean),
        settings=[
            (r.setting, r.probe, r.label_acc, round(r.cos_min, 6), r.rank_min, r.d) for r in clean
        ],
    )


def claim_precision_hurts(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> Claim:
    """float16 / 3-decimal broadcasts halve the exact-feature rate or worse."""
    text = (
        "lower broadcast precision (float16, 3 decimals) sharply reduces fine-grained feature "
        "recovery"
    )
    digits = digits_raw(rows)
    ref = {r.probe: r for r in digits if r.precision == "float64"}
    low = [r for r in digits if r.precision in ("float16", "decimals:3") and r.probe in ref]
    if not low:
        return not_tested(text, "no float16 / 3-decimal setting with a float64 reference")
    return claim(
        text,
        all(r.exact_rate < 0.5 * ref[r.probe].exact_rate for r in low),
        exact_rate={f"{r.probe}/{r.precision}": r.exact_rate for r in digits},
        cos_mean={f"{r.probe}/{r.precision}": round(r.cos_mean, 4) for r in digits},
    )


def claim_fp16_labels_survive(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> Claim:
    """At float16 the label accuracy exceeds the exact-feature rate by 0.2."""
    text = (
        "at float16 labels survive longer than features (label accuracy above the "
        "exact-feature rate)"
    )
    fp16 = [r for r in digits_raw(rows) if r.precision == "float16"]
    if not fp16:
        return not_tested(text, "no float16 setting")
    return claim(
        text,
        all(r.label_acc > r.exact_rate + 0.2 for r in fp16),
        label_acc={r.probe: r.label_acc for r in fp16},
        exact_rate={r.probe: r.exact_rate for r in fp16},
    )


def claim_one_class_fails(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> Claim:
    """One-class own data leaves rank(D) < d and the identification fails."""
    text = "insufficiently diverse own data (one class) leaves rank(D) < d and identification fails"
    one = [r for r in settings_of(rows) if r.diversity == "one class"]
    if not one:
        return not_tested(text, "no one-class setting")
    return claim(
        text,
        all(r.rank_min < r.d and (r.label_acc < 1 or r.cos_min < 0.999) for r in one),
        rows=[(r.rank_min, r.d, r.label_acc, round(r.cos_mean, 4)) for r in one],
    )


def claim_concurrency_breaks(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> Claim:
    """Concurrent honest updates between probes break exact feature recovery."""
    text = "concurrent honest activity between probes breaks exact recovery"
    conc = [r for r in settings_of(rows) if r.concurrent > 0]
    if not conc:
        return not_tested(text, "no setting with concurrent honest activity")
    return claim(
        text,
        all(r.cos_min < 0.999 for r in conc),
        rows=[(r.concurrent, r.label_acc, round(r.cos_mean, 4)) for r in conc],
    )


def claim_minimal_probes(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> Claim:
    """ceil(d / c) unrestricted probes reach rank d.

    The probe count is the plan's, not a measurement: it decides whether the claim is tested
    (the minimal set was sent), and only the rank reached decides whether it holds.
    """
    text = "ceil(d/c) unrestricted probes are sufficient (the minimal probe set reaches rank d)"
    unr = [r for r in clean_settings(rows) if r.probe == "unrestricted"]
    not_minimal = [(r.setting, r.probes) for r in unr if r.probes != math.ceil(r.d / N_CLASSES)]
    if not unr or not_minimal:
        return not_tested(text, f"no minimal unrestricted probe set was run: {not_minimal}")
    return claim(
        text,
        all(r.rank_min == r.d for r in unr),
        rows=[(r.setting, r.probes, r.rank_min, r.d) for r in unr],
    )


def claim_detectability(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> Claim:
    """A server-side statistic flags unrestricted probes but not own-data batches."""
    det = next(r for r in rows if isinstance(r, DetectionRow))
    return claim(
        "unrestricted probes are detectable by a server-side statistic; own-data batches are not",
        det.unrestricted_flag_rate == 1.0
        and det.own_data_flag_rate <= det.honest_false_flag_rate + 0.1,
        **dataclasses.asdict(det),
    )


def claim_no_false_certificate(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> Claim:
    """No certificate is issued for a wrong recovery (not tested when none is issued)."""
    text = "no certificate is issued for a wrong sample (label wrong or cosine <= 0.999)"
    sr = settings_of(rows)
    issued = sum(round(r.certified * r.deletions) for r in sr)
    wrong = sum(r.certified_wrong for r in sr)
    if issued == 0:
        return not_tested(text, "no certificate was issued", certified_wrong=wrong)
    return claim(text, wrong == 0, certified_wrong=wrong, certificates=issued)


CLAIMS: tuple[ClaimFn, ...] = (
    claim_exact_float64,
    claim_precision_hurts,
    claim_fp16_labels_survive,
    claim_one_class_fails,
    claim_concurrency_breaks,
    claim_minimal_probes,
    claim_detectability,
    claim_no_false_certificate,
)


EXACT_RULE = "label right and |cosine| of the recovered to the true features > 0.999 (exact)"


def risk_of(rows: Sequence[Row], cfg: UnlearningBroadcastConfig) -> RiskCard:
    """The card of the protocol setting whose broadcasts gave away the most deleted records
    exactly (certified first), scored against the deleted records."""
    releases: dict[str, Release] = {
        f"the unlearning server's broadcasts to a {r.probe} prober ({r.setting}, "
        f"{r.precision}, {r.diversity} own data, concurrency {r.concurrent:g})": (
            [
                scored_finding(
                    "unlearning-broadcast",
                    share_count(r.exact_rate, r.deletions),
                    r.deletions,
                    rule=EXACT_RULE,
                    certified=share_count(r.certified, r.deletions),
                    detail=f"label accuracy {r.label_acc:.3g}, {r.certified_wrong} wrong "
                    "certificates",
                )
            ],
            [],
        )
        for r in settings_of(rows)
    }
    return riskiest_card(releases)
