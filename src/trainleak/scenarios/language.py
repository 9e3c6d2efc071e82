"""Language-model membership: build a target with a recorded split, run every passive score
from one shared pass, n-sampling, ADRA and ADRA+ on the same candidate pool, and score them
against the split (the only place the labels of the test candidates are read).

The pool handed to the attacks is the test candidates followed by a small calibration set whose
labels the adversary knows. The attacks never read labels: the RL attacks report their scores
at every evaluated step, and :func:`choose_step` fixes the step budget here, on the calibration
part only; all scores below are of the test candidates only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from trainleak.attacks import get_attack
from trainleak.attacks.language.passive import passive_scores, score_release
from trainleak.metrics.membership import auroc
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.language import LanguageModelRelease
from trainleak.systems.language import MembershipSplit, TargetSettings, build_target


@dataclass(frozen=True)
class LMOutcome:
    """Scores of the test candidates, by method, and what the RL attacks did.

    Attributes:
        split: the recorded split.
        scores: method -> test-candidate scores (higher = member).
        per_step: RL method -> evaluated step -> test-candidate scores.
        calibration_auroc: RL method -> evaluated step -> AUROC on the calibration set.
        chosen_step: RL method -> the step picked on the calibration set.
        rewards: RL method -> mean reward per step.
        best_text: method -> best sampled continuation per test candidate.
        rl_stats: RL method -> samples per second, generation share, seconds.
        seconds: stage -> wall time.
    """

    split: MembershipSplit
    scores: dict[str, torch.Tensor]
    per_step: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)
    calibration_auroc: dict[str, dict[int, float]] = field(default_factory=dict)
    chosen_step: dict[str, int] = field(default_factory=dict)
    rewards: dict[str, list[float]] = field(default_factory=dict)
    best_text: dict[str, list[str]] = field(default_factory=dict)
    rl_stats: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def pool_knowledge(split: MembershipSplit) -> Knowledge:
    """The adversary's pool: test candidates then the calibration set (whose labels only
    :func:`choose_step` reads)."""
    return Knowledge(candidate_texts=split.all_texts)


def choose_step(
    per_step: Mapping[int, torch.Tensor], is_member: torch.Tensor
) -> tuple[int, dict[int, float]]:
    """The evaluated RL step with the best AUROC on the labelled calibration candidates
    (earliest on ties), with the AUROC of every step; the last step, and no AUROCs, when the
    calibration set lacks members or non-members.

    Args:
        per_step: step -> scores of the calibration candidates.
        is_member: their labels.
    """
    last = max(per_step)
    if not (bool(is_member.any()) and bool((~is_member).any())):
        return last, {}
    calib = {s: auroc(v, is_member) for s, v in sorted(per_step.items())}
    best = max(calib.values())
    return min(s for s, a in calib.items() if a >= best - 1e-12), calib


def run_lm_membership(
    settings: TargetSettings,
    attack_params: Mapping[str, Any],
    *,
    seed: int = 0,
    rl_methods: tuple[str, ...] = ("adra", "adra-plus"),
    progress: Progress | None = None,
    release: tuple[LanguageModelRelease, MembershipSplit] | None = None,
) -> LMOutcome:
    """Build (or take) a target and score every method on its test candidates."""
    t0 = time.perf_counter()
    rel, split = release if release is not None else build_target(settings, seed, progress)
    seconds = {"target": time.perf_counter() - t0}
    n = len(split.texts)
    t1 = time.perf_counter()
    max_length = rel.model.spec.max_length
    target, ref, _ = score_release(rel, list(split.texts), max_length, 32)
    scores = dict(passive_scores(target, list(split.texts), ref))
    seconds["passive"] = time.perf_counter() - t1
    knowledge = pool_knowledge(split)
    common = {k: v for k, v in attack_params.items() if k in _SAMPLING_KEYS}
    t2 = time.perf_counter()
    ns = get_attack("lm-n-sampling", **common)(rel, knowledge, seed=seed)
    seconds["n-sampling"] = time.perf_counter() - t2
    out = LMOutcome(split, {**scores, "n-sampling": _head(ns.scores, n)}, seconds=seconds)
    out.best_text["n-sampling"] = list(ns.diagnostics["best_text"][:n])
    for method in rl_methods:
        t3 = time.perf_counter()
        rec = get_attack(method, **attack_params)(rel, knowledge, seed=seed, progress=progress)
        seconds[method] = time.perf_counter() - t3
        _record(out, method, rec.diagnostics, rec.trace, split)
    return out


_SAMPLING_KEYS = frozenset(
    {
        "prefix_ratio",
        "ngram_min",
        "ngram_max",
        "len_tol",
        "n_samples",
        "agg",
        "max_new_tokens",
        "temperature",
        "top_p",
        "top_k",
        "max_length",
        "batch_size",
    }
)


def _head(scores: torch.Tensor | None, n: int) -> torch.Tensor:
    if scores is None:
        raise ValueError("the attack returned no scores")
    return scores[:n].clone()


def _record(
    out: LMOutcome,
    method: str,
    diag: Mapping[str, Any],
    trace: list[dict[str, float]],
    split: MembershipSplit,
) -> None:
    """Store an RL attack's per-step scores and its scores at the step chosen on the
    calibration candidates (those after the ``n`` test candidates)."""
    n = len(split.texts)
    steps = {int(s): torch.tensor(v) for s, v in diag["scores_per_step"].items()}
    chosen, calib = choose_step(
        {s: v[n:] for s, v in steps.items()}, torch.tensor(split.calibration_is_member)
    )
    out.per_step[method] = {s: v[:n].clone() for s, v in steps.items()}
    out.scores[method] = out.per_step[method][chosen].clone()
    out.calibration_auroc[method] = calib
    out.chosen_step[method] = chosen
    out.rewards[method] = [float(r["reward"]) for r in trace]
    out.best_text[method] = list(diag["best_text_per_step"][chosen][:n])
    out.rl_stats[method] = {
        k: float(diag[k]) for k in ("rl_samples_per_second", "generation_share", "rl_seconds")
    }
