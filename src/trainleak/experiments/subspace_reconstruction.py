"""Experiment ``subspace-reconstruction``: reconstruction from initial plus final weights (seed 12).

Two parts, both with the attacks of :mod:`trainleak.attacks.checkpoint.init_final`:

(a) The width law on random features: synthetic data on the sphere of radius sqrt(d), a
    random-feature model fitted by minimum-norm interpolation from a known a_0, reconstructed by
    full-space projection-loss search; the matched error against p / (d n) shows the transition.
    The same sweep on data in an s-dimensional subspace, searched in full space and inside the
    (known, from public samples) subspace, shows the threshold moving from ~d n to ~s n.
(b) General two-layer ReLU networks trained by full-batch GD on 10 images (one per class) of
    digits, MNIST and CIFAR-10: full-space last-layer projection versus the subspace-aware
    attack (V_s from the first-layer weight change) at equal widths, scored by SSIM after a
    one-to-one (Hungarian, NCC) matching, with trivial baselines scored by the same code, and
    an Adam-trained control where the span property of the first-layer change fails.

References:
    Tansley, Makhlouf, Massart et al., "Efficient Techniques for Data Reconstruction, with
    Finite-Width Recovery Guarantees", arXiv 2605.06519, 2026.
    Iurada, Bombari, Tommasi and Mondelli, "A Law of Data Reconstruction for Random Features
    (and Beyond)", ICLR 2026.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from matplotlib.figure import Figure
from pydantic import Field
from scipy.optimize import linear_sum_assignment

from trainleak.attacks.base import Reconstruction
from trainleak.attacks.checkpoint.init_final import (
    ParameterChangeMatching,
    SubspaceParameterMatching,
)
from trainleak.attacks.checkpoint.two_layer import TwoLayerChange
from trainleak.data import balanced_subset, load_dataset, to_symmetric
from trainleak.experiments.base import (
    ExperimentConfig,
    Result,
    evaluate_claims,
    experiment,
    rows_table,
)
from trainleak.experiments.subspace_claims import (
    RF_CONDITIONS,
    ImageRow,
    Row,
    WidthRow,
    claim_functions,
    rf_metrics,
    risk_of,
)
from trainleak.metrics import (
    evaluate_reconstruction,
    random_candidates,
    reconstruction_grid,
)
from trainleak.models import model_spec
from trainleak.progress import Progress
from trainleak.releases import Checkpoint, Knowledge
from trainleak.systems.training import History, TrainConfig, train_checkpoint
from trainleak.systems.training.random_features import random_features_checkpoint

Dataset = Literal["digits", "mnist", "cifar10"]
_DATASETS: tuple[Dataset, ...] = ("digits", "mnist", "cifar10")


class SubspaceConfig(ExperimentConfig):
    """Config of ``subspace-reconstruction``; defaults fit two CPU cores in a few minutes."""

    rf_dim: int = Field(20, ge=2, description="input dimension d of the synthetic data")
    rf_n: int = Field(10, ge=1, description="training points n")
    rf_subspace_dim: int = Field(3, ge=1, description="dimension s of the data subspace")
    rf_widths: list[int] = Field(default_factory=lambda: [25, 50, 100, 200, 400, 800, 1600])
    rf_steps: int = Field(1500, ge=1)
    rf_restarts: int = Field(2, ge=1)
    rf_lr_full: float = Field(0.05, gt=0, description="search learning rate, full space")
    rf_lr_subspace: float = Field(0.3, gt=0, description="search learning rate, subspace")
    rf_tol: float = Field(0.1, gt=0, description="matched error counted as recovery")
    datasets: list[Dataset] = Field(default_factory=lambda: list(_DATASETS))
    data_dir: str | None = None
    widths: list[int] = Field(default_factory=lambda: [16, 64, 256])
    train_lr: float = Field(0.05, gt=0)
    train_steps: int = Field(300, ge=1)
    attack_steps: int = Field(800, ge=1)
    attack_restarts: int = Field(2, ge=1)
    attack_lr: float = Field(0.05, gt=0)
    adam_control: bool = True


def matched_l2_error(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """Mean Hungarian-matched l2 distance between rows, divided by sqrt(d)."""
    a, b = x.reshape(len(x), -1).double(), x_hat.reshape(len(x_hat), -1).double()
    cost = torch.cdist(a, b).numpy()
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean() / a.shape[1] ** 0.5)


def span_energy(net: TwoLayerChange, x: torch.Tensor) -> float:
    """Share of ||W1_T - W1_0||^2 inside span{x_i} (1 under (S)GD, up to rounding)."""
    q = torch.linalg.qr(x.reshape(len(x), -1).double().T)[0]
    delta = net.first_layer_delta()
    return float(((delta @ q) ** 2).sum() / (delta**2).sum())


def train_two_layer(
    cfg: SubspaceConfig, name: Dataset, width: int, optimizer: Literal["gd", "adam"]
) -> tuple[torch.Tensor, Checkpoint, History]:
    """One image per class, pixels in [-1, 1]; a 1-hidden-layer ReLU MLP trained from a seed."""
    kwargs: dict[str, Any] = {} if name == "digits" else {"data_dir": cfg.data_dir}
    ds = balanced_subset(load_dataset(name, **kwargs), 1, seed=cfg.seed)
    x = to_symmetric(ds.x)
    spec = model_spec("mlp", input_shape=tuple(x.shape[1:]), hidden=[width], out_dim=10)
    lr = cfg.train_lr if optimizer == "gd" else cfg.train_lr / 50
    tc = TrainConfig(
        optimizer=optimizer,
        lr=lr,
        steps=cfg.train_steps,
        loss="cross_entropy",
        log_every=max(1, cfg.train_steps // 10),
        seed=cfg.seed,
    )
    ckpt, hist = train_checkpoint(spec, x, ds.y, tc, init_seed=cfg.seed)
    return x, ckpt, hist


def held_out_mean(cfg: SubspaceConfig, name: Dataset) -> torch.Tensor:
    """The mean image, in [-1, 1], of every image of the data set outside the training subset.

    The public counterpart of the training-mean image: an adversary can compute it from data
    of the same distribution without seeing the training set.
    """
    kwargs: dict[str, Any] = {} if name == "digits" else {"data_dir": cfg.data_dir}
    full = load_dataset(name, **kwargs)
    train = balanced_subset(full, 1, seed=cfg.seed).x.flatten(1)
    flat = full.x.flatten(1)
    held_out = torch.ones(len(full), dtype=torch.bool)
    for image in train:
        held_out &= (flat != image).any(dim=1)
    return to_symmetric(full.x[held_out].double().mean(0, keepdim=True)).float()


def image_rows(
    name: str,
    width: int,
    x: torch.Tensor,
    recs: dict[str, Reconstruction],
    loss: float,
    seed: int,
    *,
    part: Literal["widths", "control"] = "widths",
    optimizer: str = "gd",
    public_mean: torch.Tensor | None = None,
) -> list[ImageRow]:
    """Score each attack and (given ``public_mean``) the trivial baselines by the same code.

    The baselines get the attack's budget: ``n`` candidates, one-to-one matching. They use no
    training image: uniform noise, and ``n`` copies of the held-out mean image.
    """
    n = len(x)
    gen = torch.Generator().manual_seed(seed + 1)
    methods: dict[str, tuple[torch.Tensor, Reconstruction | None]] = {
        m: (r.inputs, r) for m, r in recs.items()
    }
    if public_mean is not None:
        methods["random uniform"] = (
            random_candidates(tuple(x.shape[1:]), n, gen, (-1.0, 1.0)),
            None,
        )
        methods["held-out mean image"] = (public_mean.expand(n, *x.shape[1:]), None)
    out = []
    for method, (cands, rec) in methods.items():
        sc = evaluate_reconstruction(x, cands, match="hungarian")
        diag = rec.diagnostics if rec is not None else {}
        out.append(
            ImageRow(
                part=part,
                dataset=name,
                width=width,
                optimizer=optimizer,
                method=method,
                train_loss=loss,
                ssim=tuple(float(v) for v in sc.ssim),
                median_ssim=sc.median_ssim,
                mean_ssim=float(sc.ssim.double().mean()),
                median_psnr=float(np.median(sc.psnr.double().numpy())),
                ssim_at_least_04=int(sc.counts[0.4]),
                ssim_at_least_06=int(sc.counts[0.6]),
                projection_loss=diag.get("loss_final"),
                subspace_dim=diag.get("subspace_dim"),
                seconds=rec.seconds if rec is not None else None,
            )
        )
    return out


def grid_image(x: torch.Tensor, recs: dict[str, Reconstruction]) -> np.ndarray:
    """Training images over their subspace-aware matches, and over their full-space matches."""
    grids = []
    for rec in recs.values():
        scores = evaluate_reconstruction(x, rec.inputs, match="hungarian")
        grids.append(reconstruction_grid(x, rec.inputs, scores, n=len(x), cols=len(x)))
    return np.concatenate(grids, axis=0)


def rf_figure(rows: list[WidthRow], d: int, n: int, s: int) -> Figure:
    """Matched error against width, with the counting thresholds d*n and s*n marked."""
    fig = Figure(figsize=(6, 3.6))
    ax = fig.subplots()
    widths = [r.width for r in rows]
    for label in RF_CONDITIONS:
        ax.semilogx(widths, [r.error(label) for r in rows], marker="o", label=label)
    ax.axvline(d * n, color="grey", ls="--", label="d*n")
    ax.axvline(s * n, color="grey", ls=":", label="s*n")
    ax.set(xlabel="width p", ylabel="matched error / sqrt(d)", title="random-feature width law")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _sphere(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True) * x.shape[1] ** 0.5


def _rf_sweep(cfg: SubspaceConfig, progress: Progress | None) -> list[WidthRow]:
    """Matched error against width for the three random-feature conditions."""
    d, n, s = cfg.rf_dim, cfg.rf_n, cfg.rf_subspace_dim
    g = torch.Generator().manual_seed(cfg.seed)
    basis = torch.linalg.qr(torch.randn(d, s, generator=g, dtype=torch.float64))[0]
    x_full = _sphere(torch.randn(n, d, generator=g, dtype=torch.float64)).float()
    x_sub = _sphere(torch.randn(n, s, generator=g, dtype=torch.float64) @ basis.T).float()
    prior = (torch.randn(5 * s, s, generator=g, dtype=torch.float64) @ basis.T).float()
    y = torch.randn(n, generator=g)
    search: dict[str, Any] = {
        "steps": cfg.rf_steps,
        "restarts": cfg.rf_restarts,
        "constraint": "sphere",
    }
    full = ParameterChangeMatching(lr=cfg.rf_lr_full, **search)
    sub = SubspaceParameterMatching(source="prior", max_dim=s, lr=cfg.rf_lr_subspace, **search)
    rows = []
    for k, p in enumerate(cfg.rf_widths):
        errors, losses = [], []
        for x, attack in ((x_full, full), (x_sub, full), (x_sub, sub)):
            ckpt = random_features_checkpoint(x, y, width=p, init_seed=cfg.seed + k)
            kn = Knowledge(input_shape=(d,), n_records=n, prior=prior)
            rec = attack(ckpt, kn, seed=cfg.seed)
            errors.append(matched_l2_error(x, rec.inputs))
            losses.append(float(rec.diagnostics["loss_final"]))
        rows.append(
            WidthRow(p, p / (d * n), p / (s * n), (errors[0], errors[1], errors[2]),
                     (losses[0], losses[1], losses[2]))
        )  # fmt: skip
        if progress is not None:
            progress("random-feature sweep", k + 1, len(cfg.rf_widths))
    return rows


def _image_part(
    cfg: SubspaceConfig, name: Dataset, progress: Progress | None
) -> tuple[list[ImageRow], dict[str, Any]]:
    """Full-space vs subspace at every width on one data set; returns rows and the last run."""
    search: dict[str, Any] = {
        "steps": cfg.attack_steps,
        "restarts": cfg.attack_restarts,
        "lr": cfg.attack_lr,
        "init_std": 0.5,
    }
    full = ParameterChangeMatching(**search)
    sub = SubspaceParameterMatching(**search)
    rows: list[ImageRow] = []
    last: dict[str, Any] = {}
    public_mean = held_out_mean(cfg, name)
    for width in cfg.widths:
        x, ckpt, hist = train_two_layer(cfg, name, width, "gd")
        kn = Knowledge(input_shape=tuple(x.shape[1:]), n_records=len(x), value_range=(-1.0, 1.0))
        recs: dict[str, Reconstruction] = {
            "subspace-aware": sub(ckpt, kn, seed=cfg.seed),
            "full space": full(ckpt, kn, seed=cfg.seed),
        }
        rows += image_rows(name, width, x, recs, hist.loss[-1], cfg.seed, public_mean=public_mean)
        last = {"x": x, "recs": recs}
        if progress is not None:
            progress(f"{name} widths", cfg.widths.index(width) + 1, len(cfg.widths))
    return rows, last


def _adam_control(cfg: SubspaceConfig) -> list[ImageRow]:
    """Subspace attack on GD- and Adam-trained copies of the first data set, largest width."""
    name, width = cfg.datasets[0], max(cfg.widths)
    attack = SubspaceParameterMatching(
        steps=cfg.attack_steps, restarts=cfg.attack_restarts, lr=cfg.attack_lr, init_std=0.5
    )
    rows = []
    for opt in ("gd", "adam"):
        x, ckpt, hist = train_two_layer(cfg, name, width, opt)  # type: ignore[arg-type]
        kn = Knowledge(input_shape=tuple(x.shape[1:]), n_records=len(x), value_range=(-1.0, 1.0))
        rec = attack(ckpt, kn, seed=cfg.seed)
        (row,) = image_rows(name, width, x, {"subspace-aware": rec}, hist.loss[-1], cfg.seed,
                            part="control", optimizer=opt)  # fmt: skip
        energy = span_energy(TwoLayerChange.from_checkpoint(ckpt), x)
        rows.append(dataclasses.replace(row, span_energy=energy))
    return rows


def _display(rows: Sequence[ImageRow]) -> list[dict[str, Any]]:
    """The display table of image rows (the per-image SSIMs stay in the rows)."""
    table = rows_table(rows)
    for r in table:
        r.pop("ssim")
    return table


@experiment(
    "subspace-reconstruction",
    "Reconstruction from initial plus final weights: random-feature width law, and "
    "subspace-aware versus full-space parameter-change matching (Tansley et al. 2026)",
    SubspaceConfig,
)
def run(cfg: SubspaceConfig, progress: Progress | None = None) -> Result:
    """Run the random-feature sweep, the image comparison and the Adam control."""
    res = Result(experiment="subspace-reconstruction", config=cfg.model_dump())
    rf_rows = _rf_sweep(cfg, progress)
    image: list[ImageRow] = []
    for name in cfg.datasets:
        rows, last = _image_part(cfg, name, progress)
        image += rows
        res.images[f"{name}_grid_subspace_vs_full"] = grid_image(last["x"], last["recs"])
    control = _adam_control(cfg) if cfg.adam_control and cfg.datasets else []
    all_rows: list[Row] = [*rf_rows, *image, *control]
    res.claims = evaluate_claims(claim_functions(cfg), all_rows, cfg)
    res.metrics.update(rf_metrics(all_rows, cfg))
    res.risk = risk_of(all_rows, cfg)
    res.tables["random features: matched error vs width"] = rows_table(rf_rows)
    res.tables["two-layer networks: subspace-aware vs full space"] = _display(image)
    if control:
        res.tables["optimizer control (subspace-aware attack)"] = _display(control)
    res.figures["rf_width_law"] = rf_figure(rf_rows, cfg.rf_dim, cfg.rf_n, cfg.rf_subspace_dim)
    res.notes = _NOTES
    return res


_NOTES = """(a) Random features: x on the sphere of radius sqrt(d); sigma = relu + tanh (no sign
ambiguity) [inferred]; last layer fitted by minimum-norm interpolation from a known a_0 (the
limit of GD on the squared loss); attack = projection loss over candidates on the sphere,
Adam with cosine-annealed learning rate, best of the restarts by final loss (no ground truth).
Error = mean Hungarian-matched l2 distance / sqrt(d). The subspace condition draws the data in a
random s-dimensional subspace; the subspace search takes its basis from public samples of the
same distribution (Knowledge.prior), because a random-feature first layer never changes.
(b) Two-layer ReLU MLPs with biases, trained by full-batch GD with cross-entropy on 10 images
(one per class, pixels in [-1, 1]) from a known initialisation. Full space = last-layer
projection loss over unconstrained candidates; subspace-aware = the same loss over x = V_s z,
with V_s the right singular vectors of W1_T - W1_0 capturing 99% energy (s <= n). Features use
the final first layer [inferred]. Scoring: one-to-one Hungarian matching by NCC, min-max
normalised SSIM (images under 16 px upsampled); baselines = uniform random images and the
mean image of the data set's images outside the training subset (held out: the attack and the
baselines see no training image), n candidates each, scored by the same code. Claims compare
methods image by image: a one-sided 95% lower bound on the mean per-image SSIM difference must
be above 0 (a median comparison over 10 images cannot tell a 0.03 gap from noise). Until this
change the mean-image baseline was the training set's own mean, which the adversary cannot
know. The Adam control measures the share of the
first-layer change's energy inside span{x_i} (1 for GD, up to rounding)."""
