"""Seed 4: the sharp transition at rho ~ d for reconstruction under rho-zCDP.

Private ridge regression with Gaussian output perturbation (rho-zCDP) is attacked by the
informed adversary (:class:`~trainleak.attacks.informed.InformedRidgeAttack`); its normalised
error ||x_hat - x||^2 (||x|| = 1) and cosine are measured against rho/d for several d, beside
the entropy (Donsker-Varadhan) lower bound for the uniform prior on the sphere, which holds for
every rho-zCDP mechanism and every attack. For data in an s-dimensional subspace the same is
repeated with the attack projecting on the known or PCA-estimated subspace, where the
transition moves to rho ~ s; PCA-projected digits give a natural case.

[inferred] design decisions: n = 2d records, ridge lam = n (so that the sensitivity
2 (1 + sqrt(n / lam)) / lam is 4 / n and the residual keeps the sign of y), labels uniform in
{-1, +1}, Wiener-style shrinkage, the transition located where the mean cosine crosses 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure
from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from trainleak.attacks.informed import InformedRidgeAttack
from trainleak.bounds.zcdp import zcdp_mse_bound
from trainleak.data import load_digits
from trainleak.errors import ConfigError
from trainleak.experiments._zcdp_risk import PRACTICAL, risk_of
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
from trainleak.experiments.risk import count_passing
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.mechanisms import ridge_output_perturbation, sphere_records, subspace_records


class ZCDPTransitionConfig(ExperimentConfig):
    """Config of ``zcdp-transition``."""

    dims: list[PositiveInt] = Field([16, 64, 256], min_length=1)
    rho_over_dim: list[PositiveFloat] = Field(
        [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0], min_length=1
    )
    trials: int = Field(30, ge=2, description="records per point (a standard error needs 2)")
    subspace_dim: int = Field(256, ge=2)
    subspace_rank: int = Field(8, ge=1)
    digits_rank: int = Field(10, ge=1, le=64, description="PCA rank of the 64-pixel digits")

    @model_validator(mode="after")
    def _rank_fits(self) -> ZCDPTransitionConfig:
        if self.subspace_rank > self.subspace_dim:
            raise ConfigError.invalid(
                "subspace_rank", f"at most subspace_dim = {self.subspace_dim}", self.subspace_rank
            )
        return self


@dataclass(frozen=True)
class TransitionRow:
    """Mean error and cosine of the informed attack over ``trials`` records at one ``rho``.

    ``bound`` (the zCDP lower bound on the expected error) and ``rho_over_s`` are None where no
    bound applies (digits: the prior is not uniform on a sphere). ``recovered`` counts the
    records with error at most :data:`._zcdp_risk.PRACTICAL`.
    """

    setting: str
    d: int
    rho: float
    rho_over_d: float
    mse: float
    mse_se: float
    cos: float
    trials: int
    recovered: int
    bound: float | None = None
    rho_over_s: float | None = None


def _trial(
    x: torch.Tensor,
    y: torch.Tensor,
    rho: float,
    g: torch.Generator,
    attack: InformedRidgeAttack,
    basis: torch.Tensor | None = None,
) -> tuple[float, float]:
    release = ridge_output_perturbation(x, y, lam=float(x.shape[0]), rho=rho, generator=g)
    # every record of every setting lies on the unit sphere: the adversary knows that norm
    know = Knowledge(
        input_shape=(x.shape[1],),
        labels=y[-1:],
        other_records=(x[:-1], y[:-1]),
        subspace_basis=basis,
        record_norm=1.0,
    )
    x_hat = attack(release, know).inputs[0].double()
    err = float(((x_hat - x[-1]) ** 2).sum() / (x[-1] ** 2).sum())
    cos = float(x_hat @ x[-1] / (x_hat.norm() * x[-1].norm() + 1e-300))
    return err, cos


def _sweep(
    cfg: ZCDPTransitionConfig,
    d: int,
    sampler: Any,
    attack: InformedRidgeAttack,
    tag: str,
    bound_dim: int | None,
    unit: int | None = None,
) -> list[TransitionRow]:
    rows = []
    g = torch.Generator().manual_seed(cfg.seed * 7919 + d)
    for r in cfg.rho_over_dim:
        rho = r * (unit or d)
        pairs = [sampler(g) for _ in range(cfg.trials)]
        errs, coss = zip(*(_trial(x, y, rho, g, attack) for x, y in pairs))
        bound = None if bound_dim is None else zcdp_mse_bound(rho, bound_dim, "sphere").value
        rows.append(_row(tag, d, rho, r, errs, coss, bound, bound_dim))
    return rows


def _row(
    tag: str,
    d: int,
    rho: float,
    r: float,
    errs: Sequence[float],
    coss: Sequence[float],
    bound: float | None,
    bound_dim: int | None,
) -> TransitionRow:
    return TransitionRow(
        setting=tag,
        d=d,
        rho=rho,
        rho_over_d=r,
        mse=float(np.mean(errs)),
        mse_se=float(np.std(errs) / math.sqrt(len(errs))),
        cos=float(np.mean(coss)),
        trials=len(errs),
        recovered=count_passing(errs, PRACTICAL, above=False),
        bound=bound,
        rho_over_s=None if bound_dim is None else rho / bound_dim,
    )


def rho_half(rows: Sequence[TransitionRow]) -> float:
    """rho where the mean cosine first crosses 0.5 (log-linear interpolation), or nan."""
    for a, b in zip(rows, rows[1:]):
        if a.cos < 0.5 <= b.cos:
            t = (0.5 - a.cos) / (b.cos - a.cos)
            return float(math.exp(math.log(a.rho) + t * math.log(b.rho / a.rho)))
    return float("nan")


def _digits_sampler(d_rank: int) -> tuple[Any, torch.Tensor]:
    ds = load_digits()
    x = ds.x.flatten(1).double()
    x = x - x.mean(0)
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    _, _, vh = torch.linalg.svd(x, full_matrices=False)

    def sample(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randperm(x.shape[0], generator=g)[: 2 * x.shape[1]]
        y = torch.randint(0, 2, (idx.numel(),), generator=g).double() * 2 - 1
        return x[idx], y

    return sample, vh[:d_rank].T


@experiment(
    "zcdp-transition",
    "Reconstruction under rho-zCDP: transition at rho ~ d (and rho ~ s in a subspace) (seed 4)",
    ZCDPTransitionConfig,
)
def run(config: ZCDPTransitionConfig, progress: Progress | None = None) -> Result:
    """Sweeps over rho/d for each d, the subspace case and PCA-projected digits."""
    plain = InformedRidgeAttack()
    rows: list[TransitionRow] = []
    for k, d in enumerate(config.dims):
        rows += _sweep(config, d, lambda g, d=d: sphere_records(2 * d, d, g), plain, "sphere", d)
        if progress is not None:
            progress("zcdp-transition", k + 1, len(config.dims) + 2)
    d, s = config.subspace_dim, config.subspace_rank
    basis = subspace_records(1, d, s, torch.Generator().manual_seed(config.seed))[2]

    def sub(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x, y, _ = subspace_records(2 * d, d, s, g, basis)
        return x, y

    known = InformedRidgeAttack(subspace="known")
    pca = InformedRidgeAttack(subspace="pca", rank=s)
    rows += _sweep(config, d, sub, plain, "subspace:none", s)
    rows += _sweep(config, d, sub, pca, "subspace:pca", s, unit=s)
    rows += _sweep_known(config, d, sub, known, basis, s)
    sampler, _ = _digits_sampler(config.digits_rank)
    dpca = InformedRidgeAttack(subspace="pca", rank=config.digits_rank)
    rows += _sweep(config, 64, sampler, plain, "digits:none", None)
    rows += _sweep(config, 64, sampler, dpca, "digits:pca", None)
    result = Result(experiment="zcdp-transition", config=config.model_dump())
    result.claims = evaluate_claims(CLAIMS, rows, config)
    result.metrics.update(
        {"rho_half_over_d": _per_d(rows, config), "subspace_shift": _subspace_shift(rows)}
    )
    result.risk = risk_of(rows, config)
    result.tables["transition"] = rows_table(rows)
    result.figures["transition"] = _figure(rows, config)
    result.notes = _NOTES
    return result


def _sweep_known(
    cfg: ZCDPTransitionConfig,
    d: int,
    sampler: Any,
    attack: InformedRidgeAttack,
    basis: torch.Tensor,
    s: int,
) -> list[TransitionRow]:
    rows = []
    g = torch.Generator().manual_seed(cfg.seed * 7919 + d + 1)
    for r in cfg.rho_over_dim:
        rho = r * s
        res = []
        for _ in range(cfg.trials):
            x, y = sampler(g)
            res.append(_trial(x, y, rho, g, attack, basis))
        errs, coss = zip(*res)
        bound = zcdp_mse_bound(rho, s, "sphere").value
        rows.append(_row("subspace:known", d, rho, r, errs, coss, bound, s))
    return rows


def _nan(v: float | None) -> float:
    return float("nan") if v is None else v


def _figure(rows: list[TransitionRow], cfg: ZCDPTransitionConfig) -> Figure:
    fig = Figure(figsize=(10, 4))
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for d in cfg.dims:
        rs = [r for r in rows if r.setting == "sphere" and r.d == d]
        x = [r.rho_over_d for r in rs]
        ax1.plot(x, [r.mse for r in rs], "o-", label=f"attack, d={d}")
        ax1.plot(x, [_nan(r.bound) for r in rs], ":", label=f"bound, d={d}")
    ax1.set_xscale("log")
    ax1.set_xlabel("rho / d")
    ax1.set_ylabel("||x_hat - x||^2 / ||x||^2")
    ax1.legend(fontsize=7)
    s = cfg.subspace_rank
    for tag in ("subspace:none", "subspace:known", "subspace:pca"):
        rs = [r for r in rows if r.setting == tag]
        ax2.plot([r.rho / s for r in rs], [r.mse for r in rs], "o-", label=tag)
    rs = [r for r in rows if r.setting == "subspace:known"]
    ax2.plot([r.rho / s for r in rs], [_nan(r.bound) for r in rs], "k:", label="bound (s-dim)")
    ax2.set_xscale("log")
    ax2.set_xlabel(f"rho / s (s = {s}, d = {cfg.subspace_dim})")
    ax2.legend(fontsize=7)
    return fig


def _setting(rows: Sequence[TransitionRow], tag: str, d: int | None = None) -> list[TransitionRow]:
    return [r for r in rows if r.setting == tag and (d is None or r.d == d)]


def _per_d(rows: Sequence[TransitionRow], cfg: ZCDPTransitionConfig) -> list[float]:
    """rho_half / d of the sphere sweep, per configured d."""
    return [rho_half(_setting(rows, "sphere", d)) / d for d in cfg.dims]


def _subspace_shift(rows: Sequence[TransitionRow]) -> float:
    """rho_half without the subspace over rho_half with the known subspace."""
    return rho_half(_setting(rows, "subspace:none")) / rho_half(_setting(rows, "subspace:known"))


def claim_bound_below_attack(rows: Sequence[TransitionRow], cfg: ZCDPTransitionConfig) -> Claim:
    """The lower bound on the expected error stays below the attack's mean (2 SE slack)."""
    text = "The zCDP lower bound stays below the attack's mean error everywhere (within 2 SE)"
    bounded = [(r, r.bound) for r in rows if r.bound is not None]
    if not bounded:
        return not_tested(text, "no setting with a bound")
    margins = [r.mse + 2.0 * r.mse_se - b for r, b in bounded]
    return claim(
        text,
        min(margins) >= 0,
        min_margin=min(margins),
        points=len(bounded),
        points_with_mean_below_bound=sum(r.mse < b for r, b in bounded),
    )


def claim_fixed_rho_over_d(rows: Sequence[TransitionRow], cfg: ZCDPTransitionConfig) -> Claim:
    """The cosine-0.5 transition sits at the same rho/d for every d (within a factor 4)."""
    text = "The transition sits at a fixed rho/d across d (within a factor 4)"
    dims = sorted({r.d for r in _setting(rows, "sphere")})
    if len(dims) < 2:
        return not_tested(text, f"a claim across d needs at least two d, the sweep has {dims}")
    per_d = {d: rho_half(_setting(rows, "sphere", d)) / d for d in dims}
    missing = [d for d, v in per_d.items() if not math.isfinite(v)]
    if missing:
        return not_tested(text, f"no cosine-0.5 crossing inside the rho sweep for d = {missing}")
    vals = list(per_d.values())
    return claim(text, max(vals) / min(vals) <= 4.0, rho_half_over_d=vals, dims=dims)


def claim_impossible_then_practical(
    rows: Sequence[TransitionRow], cfg: ZCDPTransitionConfig
) -> Claim:
    """Error near 1 well below the transition, small well above it (2 SE intervals)."""
    text = (
        "Impossible for rho << d (error >= 0.8 at rho/d <= 0.1), practical for "
        "rho >> d (error <= 0.2 at rho/d >= 100), both with 2 SE of the mean to spare"
    )
    lo = [r.mse - 2.0 * r.mse_se for r in _setting(rows, "sphere") if r.rho_over_d <= 0.1]
    hi = [r.mse + 2.0 * r.mse_se for r in _setting(rows, "sphere") if r.rho_over_d >= 100]
    if not lo or not hi:
        return not_tested(text, "the rho sweep does not reach rho/d <= 0.1 and rho/d >= 100")
    return claim(
        text,
        min(lo) >= 0.8 and max(hi) <= 0.2,
        min_error_low_rho_minus_2se=min(lo),
        max_error_high_rho_plus_2se=max(hi),
    )


def claim_subspace_shift(rows: Sequence[TransitionRow], cfg: ZCDPTransitionConfig) -> Claim:
    """A known s-dim subspace moves the transition by about d/s."""
    text = (
        "In an s-dim subspace the transition moves from rho ~ d to rho ~ s "
        "(shift within a factor 4 of d/s)"
    )
    ratio = _subspace_shift(rows)
    target = cfg.subspace_dim / cfg.subspace_rank
    if not math.isfinite(ratio):
        return not_tested(text, "no cosine-0.5 crossing inside the rho sweep", shift=ratio)
    return claim(text, target / 4 <= ratio <= target * 4, shift=ratio, d_over_s=target)


def claim_digits_pca(rows: Sequence[TransitionRow], cfg: ZCDPTransitionConfig) -> Claim:
    """PCA projection lowers the rho the attack needs on digits."""
    text = "On PCA-projected digits the projection lowers the rho needed"
    d_none = rho_half(_setting(rows, "digits:none"))
    d_pca = rho_half(_setting(rows, "digits:pca"))
    if not (math.isfinite(d_none) and math.isfinite(d_pca)):
        return not_tested(
            text,
            "no cosine-0.5 crossing inside the rho sweep",
            rho_half_none=d_none,
            rho_half_pca=d_pca,
        )
    return claim(text, d_pca < d_none, rho_half_none=d_none, rho_half_pca=d_pca)


CLAIMS: tuple[ClaimFn, ...] = (
    claim_bound_below_attack,
    claim_fixed_rho_over_d,
    claim_impossible_then_practical,
    claim_subspace_shift,
    claim_digits_pca,
)


_NOTES = (
    "Measured: normalised error ||x_hat - x||^2 / ||x||^2 and cosine of the informed ridge "
    "attack against rho-zCDP ridge regression (output perturbation), mean over trials, for "
    "x uniform on the unit sphere in R^d (n = 2d, lam = n) and for x in a random s-dim "
    "subspace of R^256 (attack without, with known, and with PCA-estimated subspace), and on "
    "digits normalised to the unit sphere (no bound: the prior is not uniform). The bound is "
    "the Donsker-Varadhan lower bound with I <= rho for the uniform prior on S^{d-1} (S^{s-1} "
    "in the subspace). [inferred]: the sensitivity argument, lam = n, label-sign rule, "
    "shrinkage, transition location where the mean cosine crosses 0.5. Claims changed for "
    "soundness: the fixed-rho/d claim is reported as not tested when the sweep has a single d "
    "(a ratio of one value is 1, so it could not fail) or a d without a crossing; the "
    "impossible/practical claim compares the 2-SE interval of each mean, not the mean, with "
    "its threshold; a claim whose transition lies outside the rho sweep is not tested."
)
