"""``lm-membership``: language-model membership inference on an open-weight release (seed 14).

A tiny word-level GPT-2 is pre-trained on public WikiText-2 text and fine-tuned on member
windows; every passive score (one shared pass), n-sampling, ADRA and ADRA+ score the same test
candidates; AUROC with paired bootstrap intervals, TPR at 1% and 0.1% FPR, ROC curves, AUROC
after every evaluated RL step (the step budget fixed on a labelled calibration split), and
example reconstructions of members and non-members.
"""

from __future__ import annotations

import time

import torch
from matplotlib.figure import Figure

from trainleak.attacks.language.passive import score_name
from trainleak.experiments._lm_risk import risk_of
from trainleak.experiments.base import Result, evaluate_claims, experiment, rows_table
from trainleak.experiments.lm_membership_claims import (
    CLAIMS,
    ComparisonRow,
    LMMembershipConfig,
    MethodRow,
    Row,
    StepRow,
)
from trainleak.metrics.membership import auroc, membership_roc, tpr_at_fpr
from trainleak.metrics.roc_bootstrap import auroc_difference_interval, auroc_interval
from trainleak.progress import Progress
from trainleak.scenarios.language import LMOutcome, run_lm_membership
from trainleak.systems.language import TargetSettings

RL = ("adra", "adra-plus")
__all__ = ["risk_of", "run"]


def _settings(cfg: LMMembershipConfig) -> TargetSettings:
    return TargetSettings(
        n_members=cfg.n_members,
        n_nonmembers=cfg.n_nonmembers,
        n_calibration=cfg.n_calibration,
        words=cfg.words,
        vocab_size=cfg.vocab_size,
        n_embd=cfg.n_embd,
        n_layer=cfg.n_layer,
        pretrain_steps=cfg.pretrain_steps,
        finetune_steps=cfg.finetune_steps,
        member_share=cfg.member_share,
        finetune_lr=cfg.finetune_lr,
    )


def _attack_params(cfg: LMMembershipConfig) -> dict[str, object]:
    return {
        "steps": cfg.rl_steps,
        "lr": cfg.rl_lr,
        "group": cfg.group,
        "prompts_per_step": cfg.prompts_per_step,
        "distractors": cfg.distractors,
        "n_samples": cfg.n_samples,
        "max_new_tokens": cfg.max_new_tokens,
        "eval_every": cfg.eval_every,
        "kl": cfg.kl,
        "prior_k": cfg.minkpp_k,
    }


def _family(method: str) -> str:
    return "rl" if method in RL else "sampling" if method == "n-sampling" else "passive"


def method_rows(out: LMOutcome, cfg: LMMembershipConfig) -> list[MethodRow]:
    """One row per score: AUROC with its bootstrap interval, TPR at 1% and 0.1% FPR."""
    mem = torch.tensor(out.split.is_member)
    rows = []
    for method, s in out.scores.items():
        lo, hi = auroc_interval(s, mem, cfg.level, n_boot=cfg.n_boot, seed=cfg.seed)
        rows.append(
            MethodRow(
                method,
                _family(method),
                auroc(s, mem),
                lo,
                hi,
                tpr_at_fpr(s, mem, 0.01),
                tpr_at_fpr(s, mem, 0.001),
                out.chosen_step.get(method, 0),
            )
        )
    return rows


def comparison_rows(out: LMOutcome, cfg: LMMembershipConfig) -> list[ComparisonRow]:
    """The paired AUROC differences the claims read."""
    mem = torch.tensor(out.split.is_member)
    pairs = [
        ("adra", "n-sampling"),
        ("adra-plus", "adra"),
        ("adra-plus", score_name("minkpp", cfg.minkpp_k)),
        ("adra", score_name("minkpp", cfg.minkpp_k)),
    ]
    rows = []
    for a, b in pairs:
        if a in out.scores and b in out.scores:
            sa, sb = out.scores[a], out.scores[b]
            lo, hi = auroc_difference_interval(
                sa, sb, mem, cfg.level, n_boot=cfg.n_boot, seed=cfg.seed
            )
            rows.append(ComparisonRow(a, b, auroc(sa, mem) - auroc(sb, mem), lo, hi))
    return rows


def step_rows(out: LMOutcome) -> list[StepRow]:
    """AUROC after every evaluated RL step."""
    mem = torch.tensor(out.split.is_member)
    rows = []
    for method, steps in out.per_step.items():
        rewards = out.rewards.get(method, [])
        for step, s in sorted(steps.items()):
            reward = rewards[step - 1] if 0 < step <= len(rewards) else float("nan")
            rows.append(
                StepRow(
                    method,
                    step,
                    auroc(s, mem),
                    out.calibration_auroc[method].get(step, float("nan")),
                    reward,
                )
            )
    return rows


@experiment(
    "lm-membership",
    "LM membership: passive scores, n-sampling, ADRA and ADRA+ on an open-weight model (seed 14)",
    LMMembershipConfig,
    requires={"transformers": "text", "peft": "text"},
)
def run(cfg: LMMembershipConfig, progress: Progress | None = None) -> Result:
    """Target, passive scores, n-sampling, ADRA, ADRA+; then rows and claims."""
    start = time.perf_counter()
    out = run_lm_membership(_settings(cfg), _attack_params(cfg), seed=cfg.seed, progress=progress)
    rows: list[Row] = [*method_rows(out, cfg), *comparison_rows(out, cfg), *step_rows(out)]
    res = Result(experiment="lm-membership", config=cfg.model_dump())
    res.claims = evaluate_claims(CLAIMS, rows, cfg)
    res.risk = risk_of(rows, cfg)
    for name, kind in (
        ("scores", MethodRow),
        ("comparisons", ComparisonRow),
        ("rl_steps", StepRow),
    ):
        res.tables[name] = rows_table(r for r in rows if isinstance(r, kind))
    res.tables["examples"] = examples(out)
    res.metrics.update({f"{k}_s": v for k, v in out.seconds.items()})
    for method, stats in out.rl_stats.items():
        res.metrics.update({f"{method}_{k}": v for k, v in stats.items()})
    res.metrics["total_s"] = time.perf_counter() - start
    res.figures["roc"] = roc_figure(out, cfg)
    res.figures["auroc_per_step"] = step_figure(rows)
    res.notes = NOTES
    return res


def examples(out: LMOutcome, per_class: int = 2) -> list[dict[str, object]]:
    """Prompt, true suffix and best reconstructions of a few members and non-members."""
    rows: list[dict[str, object]] = []
    for member in (True, False):
        idx = [i for i, m in enumerate(out.split.is_member) if m == member][:per_class]
        for i in idx:
            words = out.split.texts[i].split()
            cut = max(1, round(len(words) * 0.25))
            row: dict[str, object] = {
                "member": member,
                "prefix": " ".join(words[:cut]),
                "true_suffix": " ".join(words[cut:]),
            }
            for method, texts in out.best_text.items():
                row[method] = texts[i]
            rows.append(row)
    return rows


def roc_figure(out: LMOutcome, cfg: LMMembershipConfig) -> Figure:
    """ROC curves of loss, Min-K%++, n-sampling, ADRA and ADRA+."""
    mem = torch.tensor(out.split.is_member)
    fig = Figure(figsize=(5, 4))
    ax = fig.add_subplot()
    for method in ("loss", score_name("minkpp", cfg.minkpp_k), "reference", "n-sampling", *RL):
        if method in out.scores:
            fpr, tpr = membership_roc(out.scores[method], mem)
            ax.plot(fpr, tpr, label=f"{method} ({auroc(out.scores[method], mem):.2f})")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.5)
    ax.set(xlabel="false-positive rate", ylabel="true-positive rate", title="ROC")
    ax.legend(fontsize=7)
    return fig


def step_figure(rows: list[Row]) -> Figure:
    """Test and calibration AUROC after every evaluated RL step."""
    fig = Figure(figsize=(5, 4))
    ax = fig.add_subplot()
    for method in RL:
        pts = [r for r in rows if isinstance(r, StepRow) and r.method == method]
        if pts:
            ax.plot(
                [r.step for r in pts],
                [r.test_auroc for r in pts],
                marker="o",
                label=f"{method} test",
            )
            ax.plot(
                [r.step for r in pts],
                [r.calibration_auroc for r in pts],
                ls="--",
                label=f"{method} calibration",
            )
    ax.set(xlabel="GRPO step", ylabel="AUROC", title="AUROC per RL step")
    ax.legend(fontsize=7)
    return fig


NOTES = (
    "Public text: WikiText-2 valid; candidates: one 32-word window per WikiText-2 test paragraph "
    "(no <unk>), members and non-members from distinct paragraphs, plus a small labelled "
    "calibration split. The tokenizer (word level) is trained on the public text and all "
    "candidates alike. Base: tiny GPT-2 pre-trained on the public text (released as the "
    "reference). Target: the base fine-tuned on members mixed 1:1 with public windows. Passive "
    "scores come from one forward pass per candidate. n-sampling, ADRA and ADRA+ share the "
    "prompt split (first 25% of words), the sampler (T=1, top-p 0.95, top-k 50) and the score "
    "(best of n samples, unique word 2..6-gram coverage with length penalty). The RL step used "
    "is the one with the best calibration AUROC; test AUROC per step is shown for the curve "
    "only. Intervals: stratified (paired for differences) bootstrap over the test candidates."
)
