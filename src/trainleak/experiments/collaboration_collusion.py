"""Experiment ``collaboration-collusion``: a colluding analyst against Data Collaboration (seed 7).

Participants upload ``X_i Q_i + 1 t_i^T`` and the anchor ``X_anc Q_i + 1 t_i^T``; the analyst
aligns them (spectral GOPP) and trains a classifier. Participant 0 colludes and discloses its
data, ``(Q_0, t_0)`` and the anchor. Attacks: exact anchor inversion, known-anchor Procrustes,
pivot through the colluder's aligned rows. Defenses: noise on the private representations
(sigma) or on the anchor representations only (tau). Data: ORL faces (PCA embedding) and
synthetic face-like embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure
from pydantic import Field
from threadpoolctl import threadpool_limits

from trainleak.attacks.collaboration.collusion import (
    AnchorInversionAttack,
    AnchorProcrustesAttack,
    PivotAttack,
)
from trainleak.collaboration import (
    DCParty,
    align,
    collaborate,
    downstream_accuracy,
    linkage_rate,
    relative_error,
)
from trainleak.collaboration.data import pca_embed, random_anchor, synthetic_faces
from trainleak.defenses.collaboration import AnchorNoise, PrivateNoise
from trainleak.errors import DataNotFoundError, ShapeError
from trainleak.experiments.base import (
    Claim,
    ClaimFn,
    ExperimentConfig,
    Result,
    claim,
    evaluate_claims,
    experiment,
    not_tested,
    rows_table,
)
from trainleak.progress import Progress
from trainleak.releases.base import Knowledge

_NOTES = """Measured: records are split into train/test per identity and dealt to the parties at
random;
party 0 colludes (discloses X_0, Q_0, t_0 and the anchor). Utility = accuracy of a logistic
regression on the analyst's aligned representation (spectral GOPP, 1 power iteration), tested
on aligned test rows (ORL: identity; synthetic: a binary attribute). Privacy = identity linkage
(cosine top-1 of each reconstructed non-colluder record among the true embeddings of all records,
counted when the identity matches) and relative reconstruction error. Noise sigma (private) and
tau (anchor) are in units of the standardised embedding. [inferred]: the ORL embedding is a PCA of
the pixels fitted on all 400 faces (a public extractor stand-in); anchors are Gaussian with the
data's public mean and scale; the pivot attack fits an orthogonal map plus shift from the
colluder's aligned rows to its raw rows."""

_ATTACKS = {
    "inversion": AnchorInversionAttack(),
    "procrustes": AnchorProcrustesAttack(),
    "pivot": PivotAttack(power_iters=1),
}


_DATASETS = ("synthetic", "orl")


class CollusionConfig(ExperimentConfig):
    """Config of ``collaboration-collusion`` (linear algebra; about a minute)."""

    parties: int = Field(4, ge=2)
    anchor_rows: int = Field(64, ge=2)
    dim: int = Field(32, ge=2)
    noise_levels: list[float] = [0.0, 0.1, 0.3, 1.0, 2.0]
    party_counts: list[int] = [2, 4, 8, 16]
    synthetic_identities: int = Field(200, ge=4)
    data_dir: str | None = None


def _datasets(cfg: CollusionConfig) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    X, ids, attr = synthetic_faces(cfg.synthetic_identities, 10, cfg.dim, seed=cfg.seed)
    out = {"synthetic": (X, ids, attr)}
    try:
        from trainleak.data import load_orl_faces

        ds = load_orl_faces(cfg.data_dir)
        y = ds.y.numpy()
        out["orl"] = (pca_embed(ds.x.numpy(), cfg.dim), y, y)
    except DataNotFoundError:
        pass
    return out


def _setup(
    data: tuple[np.ndarray, np.ndarray, np.ndarray], parties: int, cfg: CollusionConfig
) -> dict[str, Any]:
    X, ids, task = data
    rng = np.random.default_rng(cfg.seed)
    test = np.zeros(len(ids), dtype=bool)
    for i in np.unique(ids):
        rows = np.flatnonzero(ids == i)
        test[rng.choice(rows, size=max(1, len(rows) // 4), replace=False)] = True
    owner = rng.integers(0, parties, len(ids))
    anchor = random_anchor(X, cfg.anchor_rows, cfg.seed + 1)
    ps = [
        DCParty(X[owner == p], task[owner == p], seed=cfg.seed * 1000 + p) for p in range(parties)
    ]
    return {
        "X": X,
        "ids": ids,
        "task": task,
        "test": test,
        "owner": owner,
        "anchor": anchor,
        "parties": ps,
    }


@dataclass(frozen=True)
class CollusionRow:
    """One release under noise ``(sigma, tau)``, scored by utility and by every attack.

    ``sweep`` is ``"tradeoff"`` (noise sweep at the configured party count) or ``"parties"``
    (party-count sweep at the middle anchor noise). Linkage and error are NaN when the attack
    refused the release.
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


@dataclass(frozen=True)
class RefusalRow:
    """Whether the exact attack refused an anchor too small for full column rank."""

    refused: bool


Row = CollusionRow | RefusalRow


def _evaluate(
    s: dict[str, Any], sigma: float, tau: float, seed: int, dataset: str, sweep: str
) -> CollusionRow:
    gen = torch.Generator().manual_seed(seed)
    release = collaborate(s["parties"], s["anchor"])
    release = AnchorNoise(tau)(PrivateNoise(sigma)(release, gen), gen)
    al = align(release, "gopp_spectral", power_iters=1)
    P = len(s["parties"])
    rows = [np.flatnonzero(s["owner"] == p) for p in range(P)]
    Z = np.zeros_like(s["X"])
    for p in range(P):
        Z[rows[p]] = al.aligned[p]
    tr, te = ~s["test"], s["test"]
    accuracy = downstream_accuracy(Z[tr], s["task"][tr], Z[te], s["task"][te])
    knowledge = Knowledge(
        hyperparameters={"disclosures": (s["parties"][0].disclose(0, s["anchor"]),)}
    )
    target = np.concatenate(rows[1:])
    scores: dict[str, float] = {}
    for name, attack in _ATTACKS.items():
        try:
            rec = attack(release, knowledge).inputs.numpy()
        except ShapeError:
            scores[f"{name}_linkage"], scores[f"{name}_error"] = float("nan"), float("nan")
            continue
        scores[f"{name}_linkage"] = linkage_rate(rec, s["ids"][target], s["X"], s["ids"])
        scores[f"{name}_error"] = relative_error(rec, s["X"][target])
    return CollusionRow(dataset, sweep, P, sigma, tau, accuracy, **scores)


@experiment(
    "collaboration-collusion",
    "a colluding analyst against Data Collaboration, with noise defenses (seed 7)",
    CollusionConfig,
)
def run(cfg: CollusionConfig, progress: Progress | None = None) -> Result:
    """Sweep both noise placements under every attack; then participant counts."""
    with threadpool_limits(limits=1):  # BLAS threads oversubscribe small solves
        return _run(cfg, progress)


def _sweeps(name: str, d: Any, cfg: CollusionConfig) -> list[CollusionRow]:
    s = _setup(d, cfg.parties, cfg)
    rows = [_evaluate(s, 0.0, 0.0, cfg.seed, name, "tradeoff")]
    rows += [_evaluate(s, v, 0.0, cfg.seed, name, "tradeoff") for v in cfg.noise_levels if v > 0]
    rows += [_evaluate(s, 0.0, v, cfg.seed, name, "tradeoff") for v in cfg.noise_levels if v > 0]
    tau_mid = sorted(cfg.noise_levels)[len(cfg.noise_levels) // 2]
    rows += [
        _evaluate(_setup(d, c, cfg), 0.0, tau_mid, cfg.seed, name, "parties")
        for c in cfg.party_counts
    ]
    return rows


def _run(cfg: CollusionConfig, progress: Progress | None) -> Result:
    result = Result("collaboration-collusion", cfg.model_dump(), notes=_NOTES)
    data = _datasets(cfg)
    rows: list[Row] = []
    for i, (name, d) in enumerate(data.items()):
        rows += _sweeps(name, d, cfg)
        if progress is not None:
            progress("data sets", i + 1, len(data))
    refused = _rank_check(cfg)
    rows.append(RefusalRow(refused))
    result.claims = evaluate_claims(CLAIMS, rows, cfg)
    result.metrics["rank_deficient_anchor_refused"] = refused
    for name in data:
        for sweep in ("tradeoff", "parties"):
            result.tables[f"{name}_{sweep}"] = rows_table(_sweep_rows(rows, name, sweep))
        result.figures[f"{name}_tradeoff"] = _figure(_sweep_rows(rows, name, "tradeoff"), name)
    return result


def _sweep_rows(rows: Sequence[Row], dataset: str, sweep: str) -> list[CollusionRow]:
    return [
        r for r in rows if isinstance(r, CollusionRow) and (r.dataset, r.sweep) == (dataset, sweep)
    ]


def _rank_check(cfg: CollusionConfig) -> bool:
    """An anchor with m rows (centred rank m - 1) must be refused by the exact attack."""
    X, ids, attr = synthetic_faces(8, 4, cfg.dim, seed=cfg.seed)
    ps = [DCParty(X[i::2], attr[i::2], seed=i) for i in range(2)]
    anchor = random_anchor(X, cfg.dim, cfg.seed)
    kn = Knowledge(hyperparameters={"disclosures": (ps[0].disclose(0, anchor),)})
    try:
        AnchorInversionAttack()(collaborate(ps, anchor), kn)
    except ShapeError:
        return True
    return False


def _tradeoff(rows: Sequence[Row], dataset: str) -> tuple[list[CollusionRow], CollusionRow | None]:
    """The noise sweep of ``dataset`` and its noiseless row (None without data)."""
    sweep = _sweep_rows(rows, dataset, "tradeoff")
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
    return claim(
        text,
        bool(low) and all(r.accuracy < clean.accuracy - 0.05 for r in low),
        rows=[(r.sigma, round(r.accuracy, 3), round(r.procrustes_linkage, 3)) for r in sig],
    )


def claim_anchor_noise_procrustes(rows: Sequence[Row], cfg: CollusionConfig, dataset: str) -> Claim:
    """Some anchor-side noise level keeps accuracy at half the anchor attack's linkage."""
    text = (
        f"{dataset}: anchor-side noise keeps accuracy (within 2 points) at low anchor-attack "
        "linkage (half the noiseless)"
    )
    sweep, clean = _tradeoff(rows, dataset)
    if clean is None:
        return _no_data(text, dataset)
    taus = [r for r in sweep if r.tau > 0]
    good = [
        r
        for r in taus
        if r.accuracy >= clean.accuracy - 0.02
        and r.procrustes_linkage <= 0.5 * clean.procrustes_linkage
    ]
    return claim(
        text,
        bool(good),
        rows=[
            (
                r.tau,
                round(r.accuracy, 3),
                round(r.procrustes_linkage, 3),
                round(r.inversion_linkage, 3),
            )
            for r in taus
        ],
    )


def claim_anchor_noise_pivot(rows: Sequence[Row], cfg: CollusionConfig, dataset: str) -> Claim:
    """Some anchor-side noise level keeps accuracy at half the pivot attack's linkage."""
    text = (
        f"{dataset}: anchor-side noise also keeps the pivot attack's linkage at half the "
        "noiseless level or below, at accuracy within 2 points"
    )
    sweep, clean = _tradeoff(rows, dataset)
    if clean is None:
        return _no_data(text, dataset)
    taus = [r for r in sweep if r.tau > 0]
    return claim(
        text,
        any(
            r.accuracy >= clean.accuracy - 0.02 and r.pivot_linkage <= 0.5 * clean.pivot_linkage
            for r in taus
        ),
        rows=[(r.tau, round(r.accuracy, 3), round(r.pivot_linkage, 3)) for r in taus],
    )


def claim_parties_keep_utility(rows: Sequence[Row], cfg: CollusionConfig, dataset: str) -> Claim:
    """Accuracy at the most parties is no more than 2 points below that at the fewest."""
    text = (
        f"{dataset}: more participants do not lower utility under anchor noise (accuracy "
        "at the most parties >= at the fewest - 2 points)"
    )
    pc = _sweep_rows(rows, dataset, "parties")
    if not pc:
        return _no_data(text, dataset)
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
    ref = [r for r in rows if isinstance(r, RefusalRow)]
    return claim(
        "an anchor too small for full column rank is refused by the exact attack with a "
        "clear error",
        bool(ref) and all(r.refused for r in ref),
    )


_PER_DATASET = (
    claim_exact_recovery,
    claim_private_noise_costly,
    claim_anchor_noise_procrustes,
    claim_anchor_noise_pivot,
    claim_parties_keep_utility,
)
CLAIMS: tuple[ClaimFn, ...] = (
    *(partial(fn, dataset=name) for name in _DATASETS for fn in _PER_DATASET),
    claim_rank_refusal,
)


def _figure(rows: list[CollusionRow], name: str) -> Figure:
    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot(1, 1, 1)
    for noise, marker in (("sigma", "o"), ("tau", "s")):
        sel = [rows[0]] + [r for r in rows if getattr(r, noise) > 0]
        for attack, ls in (("procrustes", "-"), ("pivot", "--")):
            ax.plot(
                [getattr(r, f"{attack}_linkage") for r in sel],
                [r.accuracy for r in sel],
                marker=marker,
                linestyle=ls,
                label=f"{noise} noise / {attack}",
            )
    ax.set_xlabel("identity linkage")
    ax.set_ylabel("downstream accuracy")
    ax.set_title(f"{name}: accuracy vs linkage")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
