"""Seed 15 (KD-UFSL): what the server of U-shaped federated split learning can reconstruct
from the smashed data, and how much DP noise and MDAV microaggregation take away.

For each data set the clients' records, the adversary's auxiliary images and a test set are
disjoint. Every defense setting (vanilla; DP at each sigma; MDAV at each k; DP + MDAV) trains
UFSL from the same seed and records the server's transcript; each attack (inverse network
through the known head, FORA substitute head, white-box optimisation), standard and adaptive,
runs on the transcript's first rows and is scored against the true inputs (matched inside
MDAV groups) beside the auxiliary-mean image. Test accuracy is measured with clean inference
and through the defense; every defended transcript is checked for exact k-anonymity; the DP
part is accounted for (epsilon at ``delta``).

Zaland, Mistry and Bhuyan, arXiv 2602.17614, 2026; the defense beyond the summary is
[reconstructed] (seed brief section 15, ``docs/decisions.md``).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from matplotlib.figure import Figure

from trainleak.attacks.base import Attack
from trainleak.attacks.split_learning import (
    InverseNetworkAttack,
    SubstituteHeadAttack,
    WhiteBoxHeadInversion,
)
from trainleak.bounds.split_learning import smashed_dp_epsilon
from trainleak.experiments._distillation_figures import tile
from trainleak.experiments._split_risk import risk_of
from trainleak.experiments.base import Result, evaluate_claims, experiment, rows_table
from trainleak.experiments.split_learning_kdufsl_claims import (
    CLAIMS,
    AttackRow,
    Row,
    SplitLearningKDUFSLConfig,
    UtilityRow,
)
from trainleak.progress import Progress
from trainleak.releases.split_learning import SmashedDefenseSpec, SplitTranscript
from trainleak.scenarios.split_learning import (
    SplitTask,
    attack_transcript,
    run_setting,
    settings_grid,
    split_task,
)
from trainleak.systems.split_learning import UFSLConfig


def _attacks(cfg: SplitLearningKDUFSLConfig, adaptive: bool) -> dict[str, Attack[SplitTranscript]]:
    every: dict[str, Attack[SplitTranscript]] = {
        "split-inverse-network": InverseNetworkAttack(steps=cfg.decoder_steps, adaptive=adaptive),
        "split-fora": SubstituteHeadAttack(
            steps=cfg.decoder_steps, substitute_steps=cfg.substitute_steps, adaptive=adaptive
        ),
        "split-whitebox": WhiteBoxHeadInversion(steps=cfg.whitebox_steps, adaptive=adaptive),
    }
    return {a: every[a] for a in cfg.attacks}


def _kind(name: str) -> str:
    return name.split("_")[0]


def _dataset_rows(
    cfg: SplitLearningKDUFSLConfig,
    task: SplitTask,
    images: dict[str, np.ndarray],
    progress: Progress | None,
) -> list[Row]:
    ucfg = UFSLConfig(
        rounds=cfg.rounds,
        local_epochs=cfg.local_epochs,
        batch_size=cfg.batch_size,
        lr=cfg.lrs.get(task.dataset, 0.05),
    )
    grid = settings_grid(
        cfg.sigmas,
        cfg.ks,
        cfg.kd_sigma,
        cfg.clips.get(task.dataset, 1.0),
        cfg.mdav_sketch,
        cfg.mdav_sketch_refresh,
    )
    rows: list[Row] = []
    picks: dict[str, torch.Tensor] = {}
    for i, (name, spec) in enumerate(grid.items()):
        setting = run_setting(task, ucfg, spec, cfg.seed)
        k, sigma = (1, 0.0) if spec is None else (spec.k, spec.sigma)
        eps = _epsilon(spec, ucfg.transmissions, cfg.delta)
        rows.append(
            UtilityRow(
                task.dataset,
                name,
                _kind(name),
                k,
                sigma,
                setting.acc_clean,
                setting.acc_defended,
                setting.min_multiplicity,
                eps,
            )
        )
        for adaptive in (False, True) if spec is not None else (False,):
            for aname, attack in _attacks(cfg, adaptive).items():
                out = attack_transcript(setting, task, attack, cfg.max_rows, cfg.seed)
                rows.append(
                    AttackRow(
                        task.dataset,
                        name,
                        _kind(name),
                        k,
                        sigma,
                        aname,
                        adaptive,
                        out.score.mse,
                        out.score.ssim,
                        out.baseline.mse,
                        out.baseline.ssim,
                        out.score.n,
                    )
                )
                if aname == cfg.claim_attack:
                    picks.setdefault("original", out.truth[:10])
                    picks[f"{name}{' adaptive' if adaptive else ''}"] = out.reconstruction.inputs[
                        :10
                    ]
        if progress is not None:
            progress(f"{task.dataset} settings", i + 1, len(grid))
    images[f"reconstructions_{task.dataset}"] = tile(torch.cat(list(picks.values())), 10)
    return rows


def _epsilon(spec: SmashedDefenseSpec | None, transmissions: int, delta: float) -> float:
    if spec is None or spec.sigma <= 0:
        return math.nan
    return smashed_dp_epsilon(spec.sigma, transmissions, delta).epsilon


def privacy_utility_figure(rows: list[Row], cfg: SplitLearningKDUFSLConfig) -> Figure:
    """Attack SSIM (claim attack, standard and adaptive) against test accuracy, one point
    per defense setting, one panel per data set."""
    datasets = sorted({r.dataset for r in rows})
    fig = Figure(figsize=(5.5 * len(datasets), 4.2))
    axes = np.atleast_1d(fig.subplots(1, len(datasets)))
    for ax, ds in zip(axes, datasets, strict=True):
        util = {r.setting: r for r in rows if isinstance(r, UtilityRow) and r.dataset == ds}
        for adaptive, marker in ((False, "o"), (True, "^")):
            pts = [
                r
                for r in rows
                if isinstance(r, AttackRow)
                and r.dataset == ds
                and r.attack == cfg.claim_attack
                and r.adaptive == adaptive
            ]
            acc = [getattr(util[r.setting], f"acc_{cfg.accuracy}") for r in pts]
            ax.scatter(
                acc,
                [r.ssim for r in pts],
                marker=marker,
                label="adaptive" if adaptive else "standard",
            )
            for a, r in zip(acc, pts, strict=True):
                ax.annotate(r.setting, (a, r.ssim), fontsize=7)
        base = next(r.baseline_ssim for r in rows if isinstance(r, AttackRow) and r.dataset == ds)
        ax.axhline(base, ls="--", c="grey", label="auxiliary mean")
        ax.set(
            title=f"{ds}: {cfg.claim_attack}",
            xlabel=f"test accuracy ({cfg.accuracy})",
            ylabel="reconstruction SSIM",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


@experiment(
    "split-learning-kdufsl",
    "Split learning (UFSL): inversion of smashed data vs KD-UFSL's DP + MDAV (seed 15)",
    SplitLearningKDUFSLConfig,
)
def run(cfg: SplitLearningKDUFSLConfig, progress: Progress | None = None) -> Result:
    """Train every setting on every data set, attack its transcript, then claims."""
    start, cpu = time.perf_counter(), time.process_time()
    torch_threads = torch.get_num_threads()
    rows: list[Row] = []
    images: dict[str, np.ndarray] = {}
    for ds in cfg.datasets:
        task = split_task(ds, cfg.n_clients, cfg.per_client, cfg.n_aux, cfg.n_test, cfg.seed)
        rows += _dataset_rows(cfg, task, images, progress)
    res = Result(experiment="split-learning-kdufsl", config=cfg.model_dump())
    res.claims = evaluate_claims(CLAIMS, rows, cfg)
    res.risk = risk_of(rows, cfg)
    res.tables["utility"] = rows_table(r for r in rows if isinstance(r, UtilityRow))
    res.tables["attacks"] = rows_table(r for r in rows if isinstance(r, AttackRow))
    res.images.update(images)
    res.figures["privacy_utility"] = privacy_utility_figure(rows, cfg)
    res.metrics.update(
        total_s=time.perf_counter() - start,
        cpu_s=time.process_time() - cpu,
        torch_threads=torch_threads,
    )
    res.notes = _NOTES
    return res


_NOTES = (
    "Clients, auxiliary images and test records are disjoint draws of each data set's train "
    "split. Model: head conv(3x3) + ReLU (stride 2 on MNIST and CIFAR-10), body linear(128) "
    "+ ReLU, tail linear(10); SGD with momentum 0.9 at the data set's `lrs` rate (0.02 on "
    "CIFAR-10, where 0.05 left the model near chance); sequential SplitFed with FedAvg over "
    "heads and tails. DP: each "
    "smashed record clipped to the data set's `clips` norm (about the median smashed norm) "
    "plus N(0, sigma^2 C^2); epsilon is the accountant's (replace-one, rounds x local epochs "
    "transmissions) and covers the smashed channel only. MDAV groups each batch; the tail "
    "labels every member. Attacks run on the first `max_rows` rows of the last round's "
    "transcript, scored after matching inside groups of identical rows; baseline: the "
    "auxiliary-mean image. Accuracy 'defended': test batches go through the defense as in "
    "deployment; 'clean': no defense at inference. Reconstruction figures: originals in the "
    "first row, then the claim attack under each setting. [reconstructed]: the defense's "
    "details, the sigma grid (the seed's 0.5 and 1 destroy training at these dimensions), the "
    "reading of 'up to'."
)
