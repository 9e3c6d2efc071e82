"""Passive membership scores of an open-weight language model, all from one shared pass.

Higher means "member" for every score:

* loss: mean log-likelihood per token (Yeom et al. 2018);
* zlib: total log-likelihood divided by the zlib-compressed length of the text (Carlini et al.,
  "Extracting Training Data from Large Language Models", USENIX Security 2021);
* reference: mean log-likelihood under the target minus under a reference model, here the public
  model the target was fine-tuned from (Carlini et al. 2021; Mireshghallah et al. 2022);
* Min-K%: mean of the lowest k% token log-probs (Shi et al., "Detecting Pretraining Data from
  Large Language Models", ICLR 2024);
* Min-K%++: mean of the lowest k% of (log p(x_t) - mu_t) / sigma_t, where mu_t and sigma_t^2 are
  the mean and variance of log p(z) under the next-token distribution (Zhang et al., "Min-K%++:
  Improved Baseline for Detecting Pre-Training Data from Large Language Models", ICLR 2025).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.errors import ConfigError, MissingKnowledgeError
from trainleak.models.language import LanguageModel, TokenScores, encode, token_logprobs
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.language import LanguageModelRelease
from trainleak.validation import param

DEFAULT_KS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5)
SCORES = ("loss", "zlib", "reference", "mink", "minkpp")


def lowest_k_mean(values: torch.Tensor, mask: torch.Tensor, k: float) -> torch.Tensor:
    """Per row, the mean of the lowest ``ceil(k * n)`` valid values (n = valid count)."""
    if not 0 < k <= 1:
        raise ConfigError.invalid("k", "a fraction in (0, 1]", k)
    filled = values.masked_fill(~mask, float("inf"))
    ordered = torch.sort(filled, dim=1).values
    n = mask.sum(1)
    take = torch.clamp(torch.ceil(k * n.double()).long(), min=1)
    keep = torch.arange(values.shape[1])[None, :] < take[:, None]
    return torch.where(keep, ordered, torch.zeros_like(ordered)).sum(1) / take


def minkpp_tokens(scores: TokenScores) -> torch.Tensor:
    """Per-token Min-K%++ values (log p - mu) / sigma (0 where sigma vanishes)."""
    sigma = scores.var.sqrt()
    z = (scores.logprob - scores.mean) / sigma.clamp_min(1e-12)
    return torch.where(sigma > 1e-12, z, torch.zeros_like(z))


def score_name(kind: str, k: float) -> str:
    """The key of a lowest-k score (``mink`` or ``minkpp``) in :func:`passive_scores`."""
    return f"{kind}@{k:g}"


def passive_scores(
    scores: TokenScores,
    texts: Sequence[str],
    reference: TokenScores | None = None,
    ks: Sequence[float] = DEFAULT_KS,
) -> dict[str, torch.Tensor]:
    """Every passive score of every text, keyed ``loss``, ``zlib``, ``reference`` (with a
    reference pass), ``mink@k`` and ``minkpp@k``."""
    if len(texts) != scores.logprob.shape[0]:
        raise ConfigError(f"{len(texts)} texts for {scores.logprob.shape[0]} scored sequences")
    if bool((scores.lengths() == 0).any()):
        raise ConfigError("every text needs at least one scored token")
    m = scores.mask
    total = (scores.logprob * m).sum(1)
    mean_lp = total / m.sum(1)
    zl = torch.tensor([len(zlib.compress(t.encode("utf-8"))) for t in texts], dtype=total.dtype)
    out = {"loss": mean_lp, "zlib": total / zl}
    if reference is not None:
        ref = (reference.logprob * reference.mask).sum(1) / reference.mask.sum(1)
        out["reference"] = mean_lp - ref
    zpp = minkpp_tokens(scores)
    for k in ks:
        out[score_name("mink", k)] = lowest_k_mean(scores.logprob, m, k)
        out[score_name("minkpp", k)] = lowest_k_mean(zpp, m, k)
    return out


def score_release(
    release: LanguageModelRelease, texts: Sequence[str], max_length: int, batch_size: int
) -> tuple[TokenScores, TokenScores | None, int]:
    """The one shared per-token pass over ``texts`` (target, and reference when released),
    and how many texts the target's tokeniser cut to ``max_length``."""
    enc = encode(release.model, texts, max_length)
    target = token_logprobs(release.model, enc.input_ids, enc.attention_mask, batch_size)
    ref = None
    if release.reference is not None:
        enc_r = encode(release.reference, texts, max_length)
        ref = token_logprobs(release.reference, enc_r.input_ids, enc_r.attention_mask, batch_size)
    return target, ref, enc.truncated


DEFAULT_WINDOW = 64


def token_window(lm: LanguageModel, max_length: int | None) -> int:
    """The tokens an attack reads of each text: ``max_length`` when set (the tokeniser refuses
    more than the model's context), else :data:`DEFAULT_WINDOW` or the model's context,
    whichever is smaller."""
    return min(DEFAULT_WINDOW, int(lm.spec.max_length)) if max_length is None else max_length


@register_attack
@dataclass(frozen=True, kw_only=True)
class LMPassiveScore(Attack[LanguageModelRelease]):
    """One passive membership score of each candidate text; the diagnostics hold all of them
    (from the same pass). ``score="reference"`` needs the release's reference model.
    ``max_length``: tokens read of each text (default: 64 or the model's context)."""

    name: ClassVar[str] = "lm-passive"
    summary: ClassVar[str] = "loss / zlib / reference / Min-K% / Min-K%++ membership scores"
    release_type: ClassVar[type] = LanguageModelRelease
    requires: ClassVar[frozenset[str]] = frozenset({"candidate_texts"})

    score: str = param("minkpp", choices=SCORES)
    k: float = param(0.2, gt=0, le=1)
    max_length: int | None = param(None, ge=2)
    batch_size: int = param(16, ge=1)

    def run(
        self,
        release: LanguageModelRelease,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        texts = list(knowledge.candidate_texts or ())
        if self.score == "reference" and release.reference is None:
            raise MissingKnowledgeError("score='reference' needs the release's reference model")
        window = token_window(release.model, self.max_length)
        target, ref, truncated = score_release(release, texts, window, self.batch_size)
        ks = tuple(sorted({*DEFAULT_KS, self.k}))
        all_scores = passive_scores(target, texts, ref, ks)
        key = f"{self.score}@{self.k:g}" if self.score in ("mink", "minkpp") else self.score
        chosen = all_scores[key]
        if not bool(torch.isfinite(chosen).all()):
            raise ConfigError(f"score {key} is not finite for some candidates")
        return Reconstruction(
            inputs=torch.arange(len(texts))[:, None],
            scores=chosen,
            diagnostics={
                "scores": {k: v.tolist() for k, v in all_scores.items()},
                "key": key,
                "truncated": truncated,
                "max_length": window,
            },
        )

    def expected_shape(
        self, release: LanguageModelRelease, knowledge: Knowledge
    ) -> tuple[int, ...] | None:
        return (1,)


def rank_normalise(values: torch.Tensor) -> torch.Tensor:
    """Ranks scaled to [0, 1] (ties by order), 0 for the smallest; NaN-free input required."""
    n = values.numel()
    if n == 1:
        return torch.ones(1)
    ranks = torch.empty(n)
    ranks[torch.argsort(values, stable=True)] = torch.arange(n, dtype=torch.float32)
    return ranks / (n - 1)


__all__ = ["lowest_k_mean", "minkpp_tokens", "passive_scores", "rank_normalise"]
