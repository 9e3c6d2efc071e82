"""Seed 2: the DP-SGD rate-distortion lower bound beside the strongest informed attacks.

For each target epsilon the noise multiplier is chosen with Opacus's RDP accountant; the bound
is computed before training from (q, sigma, T) and the candidate pool; then, for several
targets drawn uniformly from the pool, DP-SGD (Opacus) trains a logistic regression on the
other records plus the target, and the informed adversary attacks the released trajectory
with the prior-aware posterior mean (the Bayes estimator under this prior), a MAP attack and
the population-mean baseline. Reference bounds (Guo et al. 2022, Hayes et al. 2023) are
evaluated at the same parameters.

[inferred] design decisions: the prior is the uniform distribution over the pool (so the
posterior mean is exactly Bayes-optimal and the bound needs no sampling confidence; the
sample-based variant at ``confidence`` is reported as the estimation slack); the model is a
logistic regression; blocks are 2x2 pixel patches; the feature space is the project's own
trained conv net, not LPIPS.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
from matplotlib.figure import Figure

from trainleak.attacks.informed import MAPTrajectoryAttack, PosteriorMeanAttack
from trainleak.bounds.dpsgd import Schedule, dpsgd_distortion_bound, noise_for_epsilon
from trainleak.bounds.entropy import pool_distances_sq
from trainleak.bounds.published import guo_unbiased_bound, hayes_mse_bound
from trainleak.data import ImageDataset, load_digits, load_mnist
from trainleak.experiments.base import ExperimentConfig, Result, experiment
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


def _load(cfg: DPSGDBoundConfig) -> tuple[ImageDataset, ImageDataset]:
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


def _bounds(
    cfg: DPSGDBoundConfig, sched: Schedule, pool: torch.Tensor, fmap: LPIPSFormulaMap | None
) -> dict[str, float]:
    d = pool[0].numel()
    exact = dpsgd_distortion_bound(sched, pool, patch=cfg.patch, exact_prior=True, delta=cfg.delta)
    sample = dpsgd_distortion_bound(
        sched, pool, patch=cfg.patch, confidence=cfg.confidence, delta=cfg.delta
    )
    dist = pool_distances_sq(pool.flatten(1).double().numpy())
    c = exact.components
    out = {
        "sigma": sched.noise_multipliers[0],
        "epsilon_rdp": c["epsilon"],
        "leakage_capacity": c["leakage_capacity"],
        "leakage_chi2": c["leakage_chi2"],
        "leakage_kl_null": c["leakage_kl_null"],
        "bound": exact.value,
        "bound_slb_part": c["slb_total"] / d,
        "bound_dv_part": c["dv_total"] / d,
        "bound_finite_pool_part": c["finite_pool"] / d,
        "bound_sample_conf": sample.value,
        "bound_frac_prior_var": c["frac_prior_variance"],
        "psnr_ceiling": c["psnr_ceiling"],
        "prior_variance": c["prior_variance"] / d,
        "guo_unbiased": guo_unbiased_bound(sched).value,
        "hayes_mse": hayes_mse_bound(sched, dist, cfg.hayes_samples).value / d,
    }
    if fmap is not None:
        fb = dpsgd_distortion_bound(
            sched, pool, representation="features", feature_map=fmap, exact_prior=True
        )
        out["feat_bound"] = fb.value * fb.components["dimension"]
        out["feat_prior_variance"] = fb.components["prior_variance"]
    return out


def _attack_target(
    cfg: DPSGDBoundConfig,
    sigma: float,
    others: ImageDataset,
    pool: ImageDataset,
    idx: int,
    fmap: LPIPSFormulaMap | None,
    with_map: bool,
) -> dict[str, float]:
    spec = model_spec("mlp", input_shape=tuple(pool.input_shape), hidden=[], out_dim=10)
    dcfg = DPSGDConfig(
        sampling_rate=cfg.sampling_rate,
        noise_multiplier=sigma,
        steps=cfg.steps,
        lr=cfg.lr,
        seed=cfg.seed * 100_003 + idx,
    )
    release = train_dpsgd(spec, (others.x, others.y), (pool.x[idx], pool.y[idx]), dcfg)
    know = Knowledge(
        input_shape=tuple(pool.input_shape), value_range=(0.0, 1.0), prior=pool.x,
        labels=pool.y, other_records=(others.x, others.y),
    )  # fmt: skip
    target = pool.x[idx : idx + 1]
    d = target.numel()
    pm = PosteriorMeanAttack()(release, know)
    out = {"posterior_mean": float(((pm.inputs - target) ** 2).sum()) / d}
    out["posterior_max"] = float(pm.diagnostics["posterior_max"])
    out["population_mean"] = float(((pool.x.mean(0, keepdim=True) - target) ** 2).sum()) / d
    if fmap is not None:
        with torch.no_grad():
            feats, ft = fmap(pool.x), fmap(target)
        w = pm.diagnostics["posterior_weights"].double()
        out["feat_posterior_mean"] = float(((w @ feats - ft) ** 2).sum())
        out["feat_population_mean"] = float(((feats.mean(0) - ft) ** 2).sum())
    if with_map:
        mp = MAPTrajectoryAttack(steps=cfg.map_steps, restarts=cfg.map_restarts)(release, know)
        out["map"] = float(((mp.inputs - target) ** 2).sum()) / d
    return out


def _epsilon_row(
    cfg: DPSGDBoundConfig,
    eps: float,
    others: ImageDataset,
    pool: ImageDataset,
    fmap: LPIPSFormulaMap | None,
    targets: list[int],
) -> dict[str, Any]:
    sigma = noise_for_epsilon(eps, cfg.sampling_rate, cfg.steps, cfg.delta)
    sched = Schedule.constant(cfg.sampling_rate, sigma, cfg.steps)
    row: dict[str, Any] = {"epsilon": eps, **_bounds(cfg, sched, pool.x, fmap)}
    runs = [
        _attack_target(cfg, sigma, others, pool, i, fmap, k < cfg.map_targets)
        for k, i in enumerate(targets)
    ]
    for key in runs[0]:
        vals = [r[key] for r in runs if key in r]
        row[key] = float(np.mean(vals))
        if key in ("posterior_mean", "map"):
            row[key + "_se"] = float(np.std(vals) / max(1, len(vals) - 1) ** 0.5)
    # the population mean's expected error is exactly the prior variance (target uniform over
    # the pool); the per-target average is kept as "population_mean" for comparison. The bound
    # is on the *expected* error, so only means over >= 5 targets enter the comparison.
    row["map_targets"] = min(cfg.map_targets, len(targets))
    use_map = row["map_targets"] >= 5 and "map" in row
    best = min(row["posterior_mean"], row["map"] if use_map else np.inf, row["prior_variance"])
    row["best_attack"] = best
    row["ratio_best_attack_to_bound"] = best / row["bound"] if row["bound"] > 0 else np.inf
    return row


def _figure(rows: list[dict[str, Any]]) -> Figure:
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    eps = [r["epsilon"] for r in rows]
    series = [
        ("posterior_mean", "attack: posterior mean", "o-"),
        ("map", "attack: MAP", "s-"),
        ("population_mean", "baseline: population mean", "k--"),
        ("bound", "trainleak bound (this work)", "r^-"),
        ("bound_sample_conf", "trainleak bound, sample-based (95%)", "r:"),
        ("hayes_mse", "Hayes et al. 2023 (as MSE)", "gv-"),
        ("guo_unbiased", "Guo et al. 2022 (unbiased only)", "m.:"),
    ]
    for key, label, style in series:
        if all(key in r for r in rows):
            ax.plot(eps, [max(r[key], 1e-6) for r in rows], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 1.0)
    ax.set_xlabel("epsilon (RDP, delta = 1e-5)")
    ax.set_ylabel("expected MSE per pixel")
    ax.legend(fontsize=7)
    return fig


@experiment(
    "dpsgd-distortion-bound",
    "DP-SGD rate-distortion lower bound vs informed attacks and reference bounds (seed 2)",
    DPSGDBoundConfig,
    requires={"opacus": "dp"},
)
def run(config: DPSGDBoundConfig, progress: Progress | None = None) -> Result:
    """Bound, reference bounds and attacks against epsilon; see the module docstring."""
    others, pool = _load(config)
    fmap = train_feature_net(others, seed=config.seed) if config.features else None
    g = torch.Generator().manual_seed(config.seed + 1)
    targets = torch.randperm(len(pool), generator=g)[: config.n_targets].tolist()
    rows = []
    for k, eps in enumerate(config.epsilons):
        rows.append(_epsilon_row(config, eps, others, pool, fmap, targets))
        if progress is not None:
            progress("dpsgd-distortion-bound", k + 1, len(config.epsilons))
    result = Result(experiment="dpsgd-distortion-bound", config=config.model_dump())
    result.tables["bound_vs_attacks"] = rows
    result.figures["mse_vs_epsilon"] = _figure(rows)
    _claims(result, rows)
    result.notes = _NOTES
    return result


def _claims(result: Result, rows: list[dict[str, Any]]) -> None:
    margins = [r["best_attack"] - r["bound"] for r in rows]
    result.claim(
        "The bound stays below every attack's mean error (over >= 5 targets) at every epsilon",
        all(m >= 0 for m in margins),
        min_margin=min(margins),
    )
    feat = [r["feat_posterior_mean"] - r["feat_bound"] for r in rows if "feat_bound" in r]
    if feat:
        result.claim(
            "The feature-space (LPIPS-formula) bound stays below the feature-space attack",
            all(m >= 0 for m in feat),
            min_margin=min(feat),
        )
    small = rows[0]
    result.claim(
        "At the smallest epsilon the bound is a large fraction (>= 0.5) of the prior variance",
        small["bound_frac_prior_var"] >= 0.5,
        epsilon=small["epsilon"],
        fraction=small["bound_frac_prior_var"],
    )
    bounds = [r["bound"] for r in rows]
    result.claim(
        "The bound decreases as epsilon grows",
        all(a >= b for a, b in zip(bounds, bounds[1:])),
        bounds=bounds,
    )
    mid = [r for r in rows if 1.0 <= r["epsilon"] <= 8.0]
    ratios = [r["ratio_best_attack_to_bound"] for r in mid]
    result.claim(
        "Tightness target: best attack / bound <= 2 for epsilon in [1, 8]",
        bool(ratios) and max(ratios) <= 2.0,
        ratios=ratios,
    )
    tighter = [r["epsilon"] for r in rows if r["bound"] >= r["hayes_mse"]]
    result.claim(
        "The bound is at least as tight as Hayes et al. (converted to MSE) at every epsilon",
        len(tighter) == len(rows),
        epsilons_where_tighter=tighter,
    )
    result.metrics.update(
        {
            "max_ratio_eps_1_8": max(ratios) if ratios else float("nan"),
            "min_validity_margin": min(margins),
            "bound_at_eps1": rows[0]["bound"],
        }
    )


_NOTES = (
    "Measured: for each epsilon, sigma from Opacus's RDP accountant at q, T; the bound from "
    "(q, sigma, T) and the candidate pool only (leakage = smallest of the capacity, chi^2 and "
    "KL-to-null per-step bounds; per 2x2 pixel block the larger of the dithered lattice "
    "Shannon lower bound and per-pixel Donsker-Varadhan bounds; plus the vector DV bound over "
    "the pool); DP-SGD via Opacus on logistic regression with the target drawn uniformly from "
    "the pool; attacks: posterior mean over the pool (Bayes under this prior), MAP ascent from "
    "the most likely candidates, population mean. Errors are mean squared error per pixel, "
    "averaged over targets. Slack sources in the table: leakage forms (capacity vs chi2 vs "
    "kl_null), estimation (bound vs bound_sample_conf), the SLB/DV parts, and attack "
    "sub-optimality (MAP vs posterior mean). [inferred]: the per-step KL-to-null leakage, "
    "the DV per-coordinate and pool bounds, the dithered lattice SLB, the prior = uniform pool, "
    "the Hayes-to-MSE conversion. Guo et al. covers unbiased estimators only; attacks here are "
    "biased, so it may exceed them without contradiction."
)
