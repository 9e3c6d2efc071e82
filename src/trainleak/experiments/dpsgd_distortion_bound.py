"""Seed 2: the DP-SGD rate-distortion lower bound beside the strongest informed attacks.

Two regimes. The *sweep* follows the seed: for each target epsilon the noise multiplier comes
from Opacus's RDP accountant at (q, T); the bounds are computed before training from
(q, sigma, T) and public data; then for several targets DP-SGD (Opacus) trains a logistic
regression on the other records plus the target and the informed adversary attacks the
released trajectory. The *concentrating* regime (small pool, larger q*T, smaller sigma, many
targets drawn with replacement) is where the posterior concentrates and the attack beats the
prior variance: the only place where a check "bound <= expected attack error" can fail.

Two priors. The headline is the seed's population-prior bound: the target is drawn from the
population, whose entropy and Donsker-Varadhan terms are estimated from the public sample
(the 1000-candidate pool) with confidence 1 - ``confidence``. The pool-prior bound is the
bound for a target drawn uniformly from the N public candidates, an adversary that knows the
candidate set (Hayes et al.'s setting); the prior-aware posterior mean over the pool is the
Bayes estimator there, so it is the sharpest test of that bound. Population-setting attacks
(posterior mean over the pool without the target, the mean of the other candidates) know no
more than a public sample. Reference bounds (Guo et al. 2022; Hayes et al. 2023, in success
probability and converted to MSE) are evaluated at the same parameters.

[inferred] design decisions: the model is a logistic regression; blocks are 2x2 pixel
patches; the feature space is the project's own trained conv net, not LPIPS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from matplotlib.figure import Figure
from pydantic import Field

from trainleak.attacks.informed import MAPTrajectoryAttack, PosteriorMeanAttack
from trainleak.bounds.dpsgd import (
    Schedule,
    dpsgd_distortion_bound,
    dpsgd_epsilon,
    noise_for_epsilon,
)
from trainleak.bounds.entropy import pool_distances_sq
from trainleak.bounds.published import (
    guo_unbiased_bound,
    hayes_mse_bound,
    hayes_success_bound,
    leakage_success_bound,
)
from trainleak.data import ImageDataset, load_digits, load_mnist
from trainleak.errors import ConfigError
from trainleak.experiments.base import ExperimentConfig, Result, evaluate_claims, experiment
from trainleak.experiments.dpsgd_bound_claims import (
    CLAIMS,
    BoundRow,
    display_table,
    headline_metrics,
    risk_of,
)
from trainleak.metrics.features import LPIPSFormulaMap, train_feature_net
from trainleak.models.registry import model_spec
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.training.dp import DPSGDConfig, train_dpsgd


class DPSGDBoundConfig(ExperimentConfig):
    """Config of ``dpsgd-distortion-bound`` (defaults sized for two CPU cores)."""

    dataset: Literal["digits", "mnist"] = "digits"
    data_dir: str | None = None
    epsilons: list[float] = [1.0, 2.0, 4.0, 8.0, 16.0]
    delta: float = 1e-5
    sampling_rate: float = 0.05
    steps: int = 200
    lr: float = 0.5
    n_others: int = 500
    pool_size: int = 1000
    n_targets: int = 12
    map_targets: int = 5
    map_steps: int = 5
    map_restarts: int = 2
    patch: int = 2
    features: bool = True
    hayes_samples: int = 20_000
    confidence: float = 0.05
    validity_noise_multipliers: list[float] = Field(default_factory=lambda: [1.5, 2.0, 3.0])
    validity_sampling_rate: float = Field(0.5, gt=0, le=1)
    validity_steps: int = Field(20, ge=1)
    validity_pool_size: int = Field(20, ge=2)
    validity_others: int = Field(100, ge=1)
    validity_targets: int = Field(200, ge=0, description="0 skips the concentrating regime")


def _load(cfg: DPSGDBoundConfig) -> tuple[ImageDataset, ImageDataset]:
    if cfg.validity_pool_size > cfg.pool_size or cfg.validity_others > cfg.n_others:
        raise ConfigError.invalid(
            "validity_pool_size, validity_others",
            f"at most pool_size = {cfg.pool_size} and n_others = {cfg.n_others}",
            (cfg.validity_pool_size, cfg.validity_others),
        )
    g = torch.Generator().manual_seed(cfg.seed)
    if cfg.dataset == "digits":
        ds = load_digits()
        perm = torch.randperm(len(ds), generator=g).tolist()
        return ds.subset(perm[: cfg.n_others]), ds.subset(
            perm[cfg.n_others : cfg.n_others + cfg.pool_size]
        )
    train = load_mnist("train", cfg.data_dir, limit=cfg.n_others)
    test = load_mnist("test", cfg.data_dir, limit=cfg.pool_size)
    return train, test


@dataclass(frozen=True)
class Setting:
    """One DP-SGD setting: its regime, nominal epsilon and schedule."""

    regime: str
    epsilon: float
    schedule: Schedule

    @property
    def sigma(self) -> float:
        return self.schedule.noise_multipliers[0]

    @property
    def q(self) -> float:
        return self.schedule.sampling_rates[0]


def bounds(
    cfg: DPSGDBoundConfig,
    sched: Schedule,
    pool: torch.Tensor,
    population: torch.Tensor,
    fmap: LPIPSFormulaMap | None,
) -> dict[str, Any]:
    """Every bound at ``sched``: pool prior (uniform over ``pool``), population prior (from
    the public sample ``population``), and the reference bounds."""
    d, n = pool[0].numel(), len(pool)
    exact = dpsgd_distortion_bound(sched, pool, patch=cfg.patch, exact_prior=True, delta=cfg.delta)
    sample = dpsgd_distortion_bound(
        sched, population, patch=cfg.patch, confidence=cfg.confidence, delta=cfg.delta
    )
    c = exact.components
    hayes = hayes_success_bound(sched, n, cfg.hayes_samples)
    out: dict[str, Any] = {
        **{k: c[k] for k in ("leakage", "leakage_capacity", "leakage_chi2", "leakage_kl_null")},
        "population_bound": sample.value,
        "population_psnr_ceiling": sample.components["psnr_ceiling"],
        "pool_bound": exact.value,
        "pool_bound_slb_part": c["slb_total"] / d,
        "pool_bound_dv_part": c["dv_total"] / d,
        "pool_bound_finite_pool_part": c["finite_pool"] / d,
        "prior_variance": c["prior_variance"] / d,
        "guo_unbiased": guo_unbiased_bound(sched).value,
        "hayes_mse": hayes_mse_bound(
            sched, pool_distances_sq(pool.flatten(1).double().numpy()), cfg.hayes_samples
        ).value / d,
        "hayes_success": hayes.value,
        "hayes_success_se": hayes.components["monte_carlo_se"],
        "leakage_success": leakage_success_bound(c["leakage"], n).value,
    }  # fmt: skip
    if fmap is not None:
        fb = dpsgd_distortion_bound(
            sched, pool, representation="features", feature_map=fmap, exact_prior=True
        )
        out["feat_pool_bound"] = fb.value * fb.components["dimension"]
        out["feat_prior_variance"] = fb.components["prior_variance"]
    return out


def attack_target(
    cfg: DPSGDBoundConfig,
    setting: Setting,
    others: ImageDataset,
    pool: ImageDataset,
    idx: int,
    seed: int,
    feats: torch.Tensor | None,
    with_map: bool,
) -> dict[str, Any]:
    """Train on the others plus pool record ``idx``, attack the trajectory, score each attack.

    Pool-setting attacks know the pool (which holds the target); population-setting attacks
    use the pool without the target, that is a public sample of the population.
    """
    spec = model_spec("mlp", input_shape=tuple(pool.input_shape), hidden=[], out_dim=10)
    sched = setting.schedule
    dcfg = DPSGDConfig(sampling_rate=setting.q, noise_multiplier=setting.sigma,
                       steps=sched.total_steps, lr=cfg.lr, seed=seed)  # fmt: skip
    release = train_dpsgd(spec, (others.x, others.y), (pool.x[idx], pool.y[idx]), dcfg)
    know = Knowledge(
        input_shape=tuple(pool.input_shape), value_range=(0.0, 1.0), prior=pool.x,
        labels=pool.y, other_records=(others.x, others.y),
    )  # fmt: skip
    target, x = pool.x[idx : idx + 1], pool.x.double()
    d = target.numel()

    def err(estimate: torch.Tensor) -> float:
        return float(((estimate.double() - target.double()) ** 2).sum()) / d

    pm = PosteriorMeanAttack()(release, know)
    rest = torch.arange(len(pool)) != idx
    w_rest = torch.softmax(pm.diagnostics["log_likelihood"][rest], 0)
    out: dict[str, Any] = {
        "posterior_mean": float(((pm.inputs - target) ** 2).sum()) / d,
        "identified": pm.diagnostics["posterior_argmax"] == idx,
        "pool_mean": float(((pool.x.mean(0, keepdim=True) - target) ** 2).sum()) / d,
        "population_posterior_mean": err(torch.einsum("n,n...->...", w_rest, x[rest])),
        "public_mean": err(x[rest].mean(0)),
    }
    if feats is not None:
        ft = feats[idx]
        w = pm.diagnostics["posterior_weights"].double()
        out["feat_posterior_mean"] = float(((w @ feats - ft) ** 2).sum())
        out["feat_pool_mean"] = float(((feats.mean(0) - ft) ** 2).sum())
    if with_map:
        mp = MAPTrajectoryAttack(steps=cfg.map_steps, restarts=cfg.map_restarts)(release, know)
        out["map"] = float(((mp.inputs - target) ** 2).sum()) / d
    return out


_PER_TARGET = ("posterior_mean", "identified", "pool_mean", "population_posterior_mean",
               "public_mean", "map", "feat_posterior_mean", "feat_pool_mean")  # fmt: skip


def measure(
    cfg: DPSGDBoundConfig,
    setting: Setting,
    data: tuple[ImageDataset, ImageDataset, torch.Tensor],
    fmap: LPIPSFormulaMap | None,
    targets: list[tuple[int, int]],
) -> BoundRow:
    """The row of one setting: its bounds, and every attack on each ``(pool index, seed)``."""
    others, pool, population = data
    with torch.no_grad():
        feats = fmap(pool.x).double() if fmap is not None else None
    runs = [
        attack_target(cfg, setting, others, pool, i, s, feats, k < cfg.map_targets)
        for k, (i, s) in enumerate(targets)
    ]
    per_target: dict[str, Any] = {k: tuple(r[k] for r in runs if k in r) for k in _PER_TARGET}
    sched = setting.schedule
    return BoundRow(
        regime=setting.regime, epsilon=setting.epsilon, sigma=setting.sigma,
        sampling_rate=setting.q, steps=sched.total_steps, pool_size=len(pool),
        **bounds(cfg, sched, pool.x, population, fmap), **per_target,
    )  # fmt: skip


def _sweep(
    cfg: DPSGDBoundConfig,
    others: ImageDataset,
    pool: ImageDataset,
    fmap: LPIPSFormulaMap | None,
    progress: Progress | None,
) -> list[BoundRow]:
    g = torch.Generator().manual_seed(cfg.seed + 1)
    picks = torch.randperm(len(pool), generator=g)[: cfg.n_targets].tolist()
    targets = [(i, cfg.seed * 100_003 + i) for i in picks]
    rows = []
    for k, eps in enumerate(cfg.epsilons):
        sigma = noise_for_epsilon(eps, cfg.sampling_rate, cfg.steps, cfg.delta)
        setting = Setting("sweep", eps, Schedule.constant(cfg.sampling_rate, sigma, cfg.steps))
        rows.append(measure(cfg, setting, (others, pool, pool.x), fmap, targets))
        if progress is not None:
            progress("epsilon sweep", k + 1, len(cfg.epsilons))
    return rows


def _concentrating(
    cfg: DPSGDBoundConfig,
    others: ImageDataset,
    pool: ImageDataset,
    fmap: LPIPSFormulaMap | None,
    progress: Progress | None,
) -> list[BoundRow]:
    """Many targets drawn with replacement from a small pool, at larger q*T, smaller sigma."""
    if cfg.validity_targets == 0:
        return []
    small = pool.subset(list(range(cfg.validity_pool_size)))
    few = others.subset(list(range(cfg.validity_others)))
    g = torch.Generator().manual_seed(cfg.seed + 2)
    picks = torch.randint(0, len(small), (cfg.validity_targets,), generator=g).tolist()
    targets = [(i, cfg.seed * 100_003 + 50_000 + k) for k, i in enumerate(picks)]
    rows = []
    for k, sigma in enumerate(cfg.validity_noise_multipliers):
        sched = Schedule.constant(cfg.validity_sampling_rate, sigma, cfg.validity_steps)
        setting = Setting("concentrating", dpsgd_epsilon(sched, cfg.delta), sched)
        rows.append(measure(cfg, setting, (few, small, pool.x), fmap, targets))
        if progress is not None:
            progress("concentrating regime", k + 1, len(cfg.validity_noise_multipliers))
    return rows


def _figure(table: list[dict[str, Any]]) -> Figure:
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    rows = [r for r in table if r["regime"] == "sweep"]
    eps = [r["epsilon"] for r in rows]
    series = [
        ("population_bound", "trainleak bound, population prior, 95% (headline)", "r^-"),
        ("pool_bound", "trainleak bound, prior uniform over the pool", "r:"),
        ("population_posterior_mean", "attack: posterior mean, public sample", "o-"),
        ("public_mean", "baseline: mean of the public sample", "k--"),
        ("posterior_mean", "attack: posterior mean, knows the pool", "o:"),
        ("map", "attack: MAP, knows the pool", "s:"),
        ("hayes_mse", "Hayes et al. 2023 (pool prior, as MSE)", "gv-"),
        ("guo_unbiased", "Guo et al. 2022 (unbiased only)", "m.:"),
    ]
    for key, label, style in series:
        if rows and all(key in r for r in rows):
            ax.plot(eps, [max(r[key], 1e-6) for r in rows], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 1.0)
    ax.set_xlabel("epsilon (RDP, delta = 1e-5)")
    ax.set_ylabel("expected MSE per pixel")
    ax.legend(fontsize=6)
    return fig


@experiment(
    "dpsgd-distortion-bound",
    "DP-SGD rate-distortion lower bound vs informed attacks and reference bounds (seed 2)",
    DPSGDBoundConfig,
    requires={"opacus": "dp"},
)
def run(config: DPSGDBoundConfig, progress: Progress | None = None) -> Result:
    """Bounds, reference bounds and attacks, epsilon sweep then concentrating regime."""
    others, pool = _load(config)
    fmap = train_feature_net(others, seed=config.seed) if config.features else None
    rows = _sweep(config, others, pool, fmap, progress)
    rows += _concentrating(config, others, pool, fmap, progress)
    result = Result(experiment="dpsgd-distortion-bound", config=config.model_dump())
    result.claims = evaluate_claims(CLAIMS, rows, config)
    result.metrics.update(headline_metrics(rows))
    result.risk = risk_of(rows, config)
    table = display_table(rows)
    result.tables["bound_vs_attacks"] = table
    result.figures["mse_vs_epsilon"] = _figure(table)
    result.notes = _NOTES
    return result


_NOTES = (
    "Measured: for each epsilon, sigma from Opacus's RDP accountant at q, T; the bounds from "
    "(q, sigma, T) and public data only (leakage = smallest of the capacity, chi^2 and "
    "KL-to-null per-step bounds; per 2x2 pixel block the larger of the dithered lattice "
    "Shannon lower bound and per-pixel Donsker-Varadhan bounds). Headline: the population-prior "
    "bound, estimated from the public sample with confidence 1 - confidence. pool_bound: the "
    "bound when the target is uniform over the N public candidates (exact, plus the vector DV "
    "bound over the pool): it covers the adversary that knows the candidate set, not the "
    "population setting. DP-SGD via Opacus on logistic regression, the target drawn from the "
    "pool; pool-setting attacks: posterior mean over the pool (Bayes under that prior), MAP "
    "ascent from the most likely candidates, pool mean; population-setting attacks: posterior "
    "mean over the pool without the target, mean of the other candidates. Errors are mean "
    "squared error per pixel; *_ucl columns are one-sided 95% upper confidence limits over "
    "targets, and claims use them (a bound is refuted where an attack's upper limit is below "
    "it). Concentrating regime (regime = concentrating): pool of validity_pool_size, "
    "q = validity_sampling_rate, T = validity_steps, several sigma, validity_targets targets "
    "drawn with replacement; the posterior concentrates and the attack beats the prior "
    "variance, so the validity check can fail there (a bound 10x too large is refuted). "
    "Removed as vacuous: 'the bound stays below every attack at every epsilon' over the sweep "
    "alone (there the attacks sit at the prior variance, which every such bound is below by "
    "construction), now part of the validity claim that requires a row where it can bite; and "
    "a validity check of the population-prior bound: where that bound is positive the leakage "
    "is below ~0.7 nats and no population-setting attack beats the prior variance by more than "
    "its confidence interval, and where the attack does beat it (concentrating regime) the "
    "population bound is ~0, so no measurement here can refute it. Hayes et al. are compared in "
    "their own units (success probability among the N candidates: hayes_success, against the "
    "posterior's identification rate and against trainleak's leakage turned into a success "
    "bound, leakage_success, by kl(P_s || 1/N) <= I) and converted to MSE (hayes_mse). "
    "[inferred]: the per-step KL-to-null leakage, the DV per-coordinate and pool bounds, the "
    "dithered lattice SLB, the Hayes-to-MSE conversion, the concentrating regime. Guo et al. "
    "covers unbiased estimators only; attacks here are biased, so it may exceed them without "
    "contradiction."
)
