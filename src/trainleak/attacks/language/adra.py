"""n-sampling, ADRA and ADRA+ (Yin, Morris, Shmatikov, Min and Hajishirzi, "Learning to Detect
Language Model Training Data via Active Reconstruction", arXiv 2602.19020, 2026).

* n-sampling: best-of-n (or mean) coverage of each candidate's true suffix by continuations the
  released model samples from its prefix.
* ADRA: fine-tune a copy of the released model with GRPO (:mod:`.grpo`) to reconstruct the
  suffixes of the whole unlabelled pool, rewarded by the best coverage over the own suffix and K
  distractor suffixes of other candidates; then score as n-sampling with the tuned policy.
  Members, which are already partly in the weights, are reconstructed faster.
* ADRA+: the reward mixes the two maxima with a per-prompt prior p, the rank-normalised Min-K%++
  score: p * max(all) + (1 - p) * max(distractors).

The policy is evaluated every ``eval_every`` steps (step 0 is n-sampling) and every evaluated
step's scores are reported (``diagnostics["scores_per_step"]``); the attack's own scores are the
last step's. Too many steps teach non-members too, so the step budget is a hyper-parameter to
fix on a labelled calibration split: that choice is evaluation, made by the caller with the
scores per step (``trainleak.scenarios.language.choose_step``), never by the attack.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.language.grpo import GRPOSettings, run_grpo
from trainleak.attacks.language.passive import (
    passive_scores,
    rank_normalise,
    score_name,
    score_release,
    token_window,
)
from trainleak.attacks.language.reconstruct import (
    Prompts,
    ReconstructionScores,
    Sampling,
    make_prompts,
    reconstruction_scores,
)
from trainleak.attacks.language.reward import contrastive_reward
from trainleak.errors import ConfigError
from trainleak.models.language import LanguageModel, LoraSettings, add_lora
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.language import LanguageModelRelease
from trainleak.validation import param


@dataclass(frozen=True, kw_only=True)
class _Reconstructing(Attack[LanguageModelRelease]):
    release_type: ClassVar[type] = LanguageModelRelease
    requires: ClassVar[frozenset[str]] = frozenset({"candidate_texts"})

    prefix_ratio: float = param(0.25, gt=0, lt=1)
    ngram_min: int = param(2, ge=1)
    ngram_max: int = param(6, ge=1)
    len_tol: float = param(1.5, ge=1)
    n_samples: int = param(8, ge=1)
    agg: str = param("best", choices=("best", "mean"))
    max_new_tokens: int = param(24, ge=1)
    temperature: float = param(1.0, gt=0)
    top_p: float = param(0.95, gt=0, le=1)
    top_k: int = param(50, ge=0)
    max_length: int | None = param(None, ge=2)
    batch_size: int = param(128, ge=1)

    def validate(self) -> None:
        if self.ngram_min > self.ngram_max:
            raise ConfigError.invalid(
                "ngram_max", f"an integer >= ngram_min={self.ngram_min}", self.ngram_max
            )

    @property
    def sampling(self) -> Sampling:
        return Sampling(
            self.n_samples,
            self.max_new_tokens,
            self.temperature,
            self.top_p,
            self.top_k,
            self.batch_size,
        )

    def _score(self, lm: LanguageModel, prompts: Prompts, seed: int) -> ReconstructionScores:
        return reconstruction_scores(
            lm,
            prompts,
            self.sampling,
            (self.ngram_min, self.ngram_max),
            self.len_tol,
            torch.Generator().manual_seed(seed),
        )

    def _pick(self, rec: ReconstructionScores) -> torch.Tensor:
        return rec.best if self.agg == "best" else rec.mean

    def expected_shape(self, release: Any, knowledge: Knowledge) -> tuple[int, ...] | None:
        return None


@register_attack
@dataclass(frozen=True, kw_only=True)
class NSampling(_Reconstructing):
    """Best-of-n coverage of each true suffix by the released model, without any tuning."""

    name: ClassVar[str] = "lm-n-sampling"
    summary: ClassVar[str] = "best-of-n suffix coverage by the released language model"

    def run(
        self,
        release: LanguageModelRelease,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        texts = list(knowledge.candidate_texts or ())
        window = token_window(release.model, self.max_length)
        prompts = make_prompts(release.model, texts, self.prefix_ratio, window)
        rec = self._score(
            release.model, prompts, int(torch.randint(2**31 - 1, (1,), generator=generator))
        )
        return Reconstruction(
            inputs=_text_ids(rec.best_text),
            scores=self._pick(rec),
            diagnostics={
                "best": rec.best.tolist(),
                "mean": rec.mean.tolist(),
                "best_text": rec.best_text,
                "truncated": prompts.truncated,
                "max_length": window,
            },
        )


def _text_ids(texts: list[str]) -> torch.Tensor:
    """The candidate index of each reconstruction (the texts are in the diagnostics)."""
    return torch.arange(len(texts))[:, None]


@register_attack
@dataclass(frozen=True, kw_only=True)
class ADRA(_Reconstructing):
    """ADRA: GRPO reconstruction of the candidate pool, then n-sampling with the tuned policy."""

    name: ClassVar[str] = "adra"
    summary: ClassVar[str] = "active reconstruction by RL (GRPO) for LM membership (ADRA)"
    use_prior: ClassVar[bool] = False

    distractors: int = param(3, ge=0)
    group: int = param(8, ge=2)
    prompts_per_step: int = param(32, ge=1)
    steps: int = param(40, ge=0)
    lr: float = param(1e-4, gt=0)
    kl: float = param(0.005, ge=0)
    eval_every: int = param(5, ge=1)
    lora_r: int = param(0, ge=0)
    prior_k: float = param(0.2, gt=0, le=1)
    micro_batch: int = param(64, ge=1)

    def run(
        self,
        release: LanguageModelRelease,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        texts = list(knowledge.candidate_texts or ())
        window = token_window(release.model, self.max_length)
        prompts = make_prompts(release.model, texts, self.prefix_ratio, window)
        reward, prior_cut = self._reward(release, texts, prompts, window, generator)
        policy = self._policy(release.model)
        eval_seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
        evals: dict[int, ReconstructionScores] = {0: self._score(policy, prompts, eval_seed)}

        def on_step(step: int) -> None:
            if step % self.eval_every == 0 or step == self.steps:
                evals[step] = self._score(policy, prompts, eval_seed)

        settings = GRPOSettings(
            self.steps,
            self.prompts_per_step,
            self.group,
            self.max_new_tokens,
            self.lr,
            self.kl,
            self.temperature,
            self.top_p,
            self.top_k,
            self.micro_batch,
        )
        trace = run_grpo(
            policy,
            release.model.module,
            prompts.ids,
            reward,
            settings,
            generator,
            on_step,
            progress,
        )
        return Reconstruction(
            inputs=_text_ids(texts),
            scores=self._pick(evals[max(evals)]),
            trace=trace,
            diagnostics={
                **_diagnostics(evals, trace, self._pick),
                # the prompts (prefixes) and, with the prior (ADRA+), the whole texts it scores
                # are read as tokens; the reward compares suffixes as text, uncut
                "truncated": max(prompts.truncated, prior_cut),
                "max_length": window,
            },
        )

    def _reward(
        self,
        release: LanguageModelRelease,
        texts: list[str],
        prompts: Prompts,
        window: int,
        generator: torch.Generator,
    ) -> tuple[Any, int]:
        """The contrastive reward, and how many whole candidates the prior (ADRA+) read cut
        to ``window`` tokens (0 without it)."""
        n = len(texts)
        k = min(self.distractors, n - 1)
        others = [
            [j for j in torch.randperm(n, generator=generator).tolist() if j != i][:k]
            for i in range(n)
        ]
        prior: list[float | None] = [None] * n
        prior_cut = 0
        if self.use_prior:
            target, _, prior_cut = score_release(release, texts, window, self.micro_batch)
            mpp = passive_scores(target, texts, None, (self.prior_k,))[
                score_name("minkpp", self.prior_k)
            ]
            prior = rank_normalise(mpp).tolist()
        ngram = (self.ngram_min, self.ngram_max)
        suffixes = prompts.suffixes

        def reward(i: int, text: str) -> float:
            return contrastive_reward(
                text, suffixes[i], [suffixes[j] for j in others[i]], prior[i], ngram, self.len_tol
            )

        return reward, prior_cut

    def _policy(self, model: LanguageModel) -> LanguageModel:
        policy = LanguageModel(
            copy.deepcopy(model.module),
            model.tokenizer,
            "causal",
            f"{model.name}-policy",
            model.spec,
        )
        if self.lora_r:
            policy.module = add_lora(policy, LoraSettings(r=self.lora_r, alpha=2 * self.lora_r))  # type: ignore[assignment]
        policy.module.eval()
        return policy


@register_attack
@dataclass(frozen=True, kw_only=True)
class ADRAPlus(ADRA):
    """ADRA+: ADRA with each prompt's reward weighted by its rank-normalised Min-K%++ prior."""

    name: ClassVar[str] = "adra-plus"
    summary: ClassVar[str] = "ADRA with a Min-K%++ prior weighting the contrastive reward (ADRA+)"
    use_prior: ClassVar[bool] = True


def _diagnostics(
    evals: dict[int, ReconstructionScores],
    trace: list[dict[str, float]],
    pick: Callable[[ReconstructionScores], torch.Tensor],
) -> dict[str, Any]:
    samples = sum(r["samples"] for r in trace)
    seconds = sum(r["seconds"] for r in trace)
    gen = sum(r["gen_seconds"] for r in trace)
    cpu = sum(r["cpu_seconds"] for r in trace)
    return {
        "scores_per_step": {s: pick(r).tolist() for s, r in sorted(evals.items())},
        "best_text_per_step": {s: r.best_text for s, r in sorted(evals.items())},
        "best_text": evals[max(evals)].best_text,
        "rl_samples_per_second": samples / seconds if seconds else 0.0,
        "rl_samples_per_cpu_second": samples / cpu if cpu else 0.0,
        "generation_share": gen / seconds if seconds else 0.0,
        "rl_seconds": seconds,
    }
