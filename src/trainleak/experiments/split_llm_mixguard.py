"""Seed 10 (MIXGUARD): what the trunk server of split language-model fine-tuning can read from
the hidden states it receives, under no defense, Gaussian noise (the DP-forward baseline) at
several levels, plain mixup, and MIXGUARD.

A tiny causal transformer is pre-trained on public text (WikiText-2 paragraphs and public
records); the client fine-tunes it split three ways (bottom: embeddings and the first block,
frozen at the public weights; trunk on the server; top and classifier on the client) to
classify private Faker records by template. Each setting records the server's transcript; the
learned inverter, the adaptive inverter and BiSR-style refinement run on it and are scored by
token recovery, private-slot recovery and ROUGE-L, beside the positional-prior baseline at equal
budget and slot chance. The non-split reference trains the same parts with the same budget.
Chen et al., arXiv 2606.16801, 2026; the algorithm beyond the summary is [reconstructed]
(seed-briefs-2 §10, docs/decisions.md).
"""

from __future__ import annotations

import time

import numpy as np
from matplotlib.figure import Figure

from trainleak.attacks.base import Attack
from trainleak.attacks.split_lm import AdaptiveInverter, BiSRRefinement, LearnedInverter
from trainleak.experiments._mixguard_risk import risk_of
from trainleak.experiments.base import Result, evaluate_claims, experiment, rows_table
from trainleak.experiments.split_llm_mixguard_claims import (
    CLAIMS,
    AttackRow,
    Row,
    SplitLLMMixGuardConfig,
    UtilityRow,
    noise_to_match,
)
from trainleak.models.language import LoraSettings
from trainleak.models.split_lm import LMSplit
from trainleak.progress import Progress
from trainleak.releases.split_text import TextDefenseSpec, TextSplitTranscript
from trainleak.scenarios.split_llm import (
    World,
    WorldConfig,
    attack_run,
    baseline_score,
    build_world,
    run_defense,
)
from trainleak.systems.split_lm import SplitTrainingConfig, train_reference


def settings(cfg: SplitLLMMixGuardConfig) -> dict[str, TextDefenseSpec]:
    """Every defense setting of the sweep, by name."""
    out = {"none": TextDefenseSpec()}
    for s in cfg.sigmas:
        out[f"noise-{s:g}"] = TextDefenseSpec(kind="noise", sigma=s)
    out["mixup"] = TextDefenseSpec(kind="mixup", n_aux=cfg.n_aux)
    out["mixguard"] = TextDefenseSpec(
        kind="mixguard",
        n_insert=cfg.n_insert,
        n_aux=cfg.n_aux,
        signs=cfg.signs,
        lam0_low=cfg.lam0_low,
        lam0_high=cfg.lam0_high,
        mix=cfg.mix,
        grad_noise=cfg.grad_noise,
    )
    return out


def attacks(cfg: SplitLLMMixGuardConfig) -> dict[str, Attack[TextSplitTranscript]]:
    every: dict[str, Attack[TextSplitTranscript]] = {
        "split-lm-inverter": LearnedInverter(steps=cfg.inverter_steps),
        "split-lm-adaptive-inverter": AdaptiveInverter(steps=cfg.inverter_steps),
        "split-lm-bisr": BiSRRefinement(inverter_steps=cfg.inverter_steps, top_k=cfg.bisr_top_k),
    }
    return {a: every[a] for a in cfg.attacks}


def training_config(cfg: SplitLLMMixGuardConfig) -> SplitTrainingConfig:
    return SplitTrainingConfig(
        steps=cfg.steps,
        batch_size=cfg.batch_size,
        lr_server=cfg.lr_server,
        lr_client=cfg.lr_client,
        record_rows=cfg.record_rows,
        calib_steps=cfg.calib_steps,
        lora=LoraSettings(r=cfg.lora_r, alpha=2 * cfg.lora_r) if cfg.lora_r else None,
        refit_steps=10,
        refit_every=max(10, cfg.steps // 8),
    )


def world(cfg: SplitLLMMixGuardConfig) -> World:
    return build_world(
        WorldConfig(
            n_private=cfg.n_private,
            n_test=cfg.n_test,
            n_public_records=cfg.n_public_records,
            n_wiki=cfg.n_wiki,
            pool_size=cfg.pool_size,
            length=cfg.length,
            n_layer=cfg.n_layer,
            n_embd=cfg.n_embd,
            pretrain_steps=cfg.pretrain_steps,
            seed=cfg.seed,
        )
    )


def sweep(cfg: SplitLLMMixGuardConfig, w: World, progress: Progress | None) -> list[Row]:
    """Non-split reference, then every defense setting with every attack."""
    split, tcfg = LMSplit(cfg.bottom_end, cfg.top_start), training_config(cfg)
    ref = train_reference(w.lm, split, w.train, w.test, tcfg, cfg.seed)
    alone = train_reference(w.lm, split, w.train, w.test, tcfg, cfg.seed, trunk=False)
    rows: list[Row] = [
        UtilityRow("non-split", "nonsplit", 0.0, ref, float("nan")),
        UtilityRow("client-only", "clientonly", 0.0, alone, float("nan")),
    ]
    grid = settings(cfg)
    for i, (name, spec) in enumerate(grid.items()):
        run, acc = run_defense(w, split, spec, tcfg, cfg.seed)
        rho = run.residuals[-1] if run.residuals else float("nan")
        rows.append(UtilityRow(name, spec.kind, spec.sigma, acc, rho))
        base = baseline_score(w, run)
        for aname, attack in attacks(cfg).items():
            if name == "none" and aname == "split-lm-adaptive-inverter":
                continue  # identical to the plain inverter without a defense
            s = attack_run(w, run, attack, cfg.seed)
            rows.append(
                AttackRow(
                    name,
                    spec.kind,
                    spec.sigma,
                    aname,
                    s.token_recovery,
                    s.slot_recovery,
                    s.rouge_l,
                    base.token_recovery,
                    base.slot_recovery,
                    base.rouge_l,
                    1.0 / w.pool_size,
                    s.slots,
                )
            )
        if progress is not None:
            progress("defense settings", i + 1, len(grid))
    return rows


def privacy_utility_figure(rows: list[Row]) -> Figure:
    """Worst-case token recovery (over attacks) against accuracy, one point per setting."""
    fig = Figure(figsize=(6, 4.2))
    ax = fig.subplots()
    for r in rows:
        if not isinstance(r, UtilityRow) or r.kind in ("nonsplit", "clientonly"):
            continue
        rec = max(
            a.token_recovery for a in rows if isinstance(a, AttackRow) and a.setting == r.setting
        )
        ax.scatter([r.accuracy], [rec], marker="*" if r.kind == "mixguard" else "o")
        ax.annotate(r.setting, (r.accuracy, rec), fontsize=7)
    ref = next(r.accuracy for r in rows if isinstance(r, UtilityRow) and r.kind == "nonsplit")
    ax.axvline(ref, ls="--", c="grey", label="non-split accuracy")
    alone = [r.accuracy for r in rows if isinstance(r, UtilityRow) and r.kind == "clientonly"]
    if alone:
        ax.axvline(alone[0], ls="-.", c="tab:red", label="client alone (no server)")
    base = next((a.baseline_token for a in rows if isinstance(a, AttackRow)), np.nan)
    ax.axhline(base, ls=":", c="grey", label="positional prior")
    ax.set(xlabel="task accuracy", ylabel="worst-case token recovery", title="split-llm-mixguard")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


@experiment(
    "split-llm-mixguard",
    "Split LM fine-tuning: hidden-state inversion vs noise, mixup and MIXGUARD (seed 10)",
    SplitLLMMixGuardConfig,
)
def run(cfg: SplitLLMMixGuardConfig, progress: Progress | None = None) -> Result:
    """Build the world, sweep the defenses, then claims, tables and the plot."""
    start = time.perf_counter()
    rows = sweep(cfg, world(cfg), progress)
    res = Result(experiment="split-llm-mixguard", config=cfg.model_dump())
    res.claims = evaluate_claims(CLAIMS, rows, cfg)
    res.risk = risk_of(rows, cfg)
    res.tables["utility"] = rows_table(r for r in rows if isinstance(r, UtilityRow))
    res.tables["attacks"] = rows_table(r for r in rows if isinstance(r, AttackRow))
    res.figures["privacy_utility"] = privacy_utility_figure(rows)
    match = noise_to_match(rows)
    res.metrics.update(
        total_s=time.perf_counter() - start,
        noise_sigma_to_match=None if match is None else match[0],
        noise_accuracy_at_match=None if match is None else match[1],
    )
    res.notes = _NOTES
    return res


_NOTES = (
    "Model: GPT-2-style, 4 blocks, width 64, pre-trained on public text only; split bottom = "
    "embeddings + block 1 (frozen public weights), trunk = blocks 2-3 (server), top = block 4 "
    "+ final norm + mean pooling over real tokens + linear classifier (client). Task: 8 record "
    "templates in 4 pairs differing by one word. Slots: first name, city, year, 3-digit number "
    "from pools of `pool_size` values (chance 1/pool_size). Scores on the first `record_rows` "
    "transcript rows: token recovery at the original positions, slot recovery at slot "
    "positions, ROUGE-L between everything recovered and the original. Baseline: the most "
    "frequent public token at each position (one guess a position, like the attacks). "
    "MIXGUARD: decoys, per-channel secret mixing with 2 auxiliary public rows (the private "
    "row's weight drawn in [lam0_low, lam0_high], 0.2-0.4 by default), secret signs, "
    "calibration (the client's own clean bottom output plus an MLP correction read from the "
    "linear un-mixing with cached auxiliary trunk outputs; the top attends to real positions "
    "only), gradient noise scaled by the calibration residual. Client-only reference: the "
    "client's top on its own bottom output, no server, same budget: on this task the top "
    "alone nearly solves it, so read MIXGUARD's accuracy against both references. The adaptive "
    "inverter and BiSR read channel magnitudes under the sign mask (it leaves them "
    "unchanged). [reconstructed]: every MIXGUARD detail beyond the summary; BiSR matches "
    "forward activations only."
)
