"""Targets with known membership for language-model membership inference (issue 15).

From WikiText-2 (Merity et al. 2017): the *valid* split is public text; the *test* split gives the
candidates, word windows taken from distinct paragraphs. A tiny GPT-2 is pre-trained on the
public text (the public base model, also the reference), then a copy is fine-tuned on the
members mixed with public text (the release). Non-members are windows of other test paragraphs,
held out. A small labelled calibration split (members and non-members, disjoint from the test
candidates) is kept aside. The split is recorded (:class:`MembershipSplit`), so scoring is exact.

How hard the task is is set by how often each member is seen in fine-tuning
(``finetune_steps * batch_size * member_share / n_members``): the defaults aim at a passive
loss AUROC well inside (0.5, 1), not at 1.0 (docs/decisions.md, issue 15).
"""

from __future__ import annotations

import copy
import json
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from trainleak.data.text import load_wikitext2
from trainleak.errors import ConfigError
from trainleak.models.language import (
    LanguageModel,
    fine_tune,
    tiny_causal_lm,
    train_word_tokenizer,
)
from trainleak.progress import Progress
from trainleak.releases.language import LanguageModelRelease
from trainleak.validation import check_fields, param

_MARKUP = {" @-@ ": "-", " @,@ ": ",", " @.@ ": "."}


def clean(paragraph: str) -> str:
    """WikiText's tokenised markup undone (`` @-@ `` -> ``-``), spaces collapsed."""
    for k, v in _MARKUP.items():
        paragraph = paragraph.replace(k, v)
    return re.sub(r"\s+", " ", paragraph).strip()


def candidate_windows(paragraphs: list[str], words: int, seed: int) -> list[str]:
    """One window of ``words`` words from each paragraph that has enough words and no
    ``<unk>`` in the window; paragraphs are visited in a seeded order."""
    rng = random.Random(seed)
    order = list(range(len(paragraphs)))
    rng.shuffle(order)
    out = []
    for i in order:
        parts = clean(paragraphs[i]).split()
        if len(parts) < words:
            continue
        start = rng.randrange(len(parts) - words + 1)
        window = parts[start : start + words]
        if "<unk>" not in window:
            out.append(" ".join(window))
    return out


def public_windows(paragraphs: list[str], words: int) -> list[str]:
    """Every consecutive ``words``-word window of the public paragraphs (``<unk>`` kept)."""
    out: list[str] = []
    for p in paragraphs:
        parts = clean(p).split()
        out.extend(" ".join(parts[i : i + words]) for i in range(0, len(parts) - words + 1, words))
    return out


@dataclass(frozen=True)
class TargetSettings:
    """How the target is built (defaults: a two-core CPU in about a minute)."""

    n_members: int = param(100, ge=2)
    n_nonmembers: int = param(100, ge=2)
    n_calibration: int = param(20, ge=0)
    words: int = param(32, ge=8)
    vocab_size: int = param(4000, ge=64)
    n_layer: int = param(2, ge=1)
    n_embd: int = param(128, ge=8)
    n_head: int = param(4, ge=1)
    max_length: int = param(64, ge=16)
    pretrain_steps: int = param(300, ge=0)
    finetune_steps: int = param(20, ge=1)
    batch_size: int = param(32, ge=1)
    member_share: float = param(0.5, gt=0, le=1)
    lr: float = param(2e-3, gt=0)
    finetune_lr: float = param(1e-3, gt=0)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class MembershipSplit:
    """The recorded split: test candidates with labels, calibration candidates with labels.

    Attributes:
        texts: the test candidates.
        is_member: one bool per test candidate.
        calibration_texts: the labelled calibration candidates.
        calibration_is_member: their labels.
    """

    texts: tuple[str, ...]
    is_member: tuple[bool, ...]
    calibration_texts: tuple[str, ...]
    calibration_is_member: tuple[bool, ...]

    def __post_init__(self) -> None:
        members = {t for t, m in zip(self.all_texts, self.all_labels) if m}
        overlap = members & {t for t, m in zip(self.all_texts, self.all_labels) if not m}
        if overlap:
            raise ConfigError(
                f"{len(overlap)} text(s) are both members and non-members, e.g. "
                f"{next(iter(overlap))[:60]!r}"
            )

    @property
    def all_texts(self) -> tuple[str, ...]:
        return self.texts + self.calibration_texts

    @property
    def all_labels(self) -> tuple[bool, ...]:
        return self.is_member + self.calibration_is_member

    def save(self, path: str | Path) -> None:
        """Write the split as JSON."""
        Path(path).write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")


def _take(settings: TargetSettings, seed: int) -> tuple[list[str], list[str], MembershipSplit]:
    """Public windows, member texts and the split."""
    public = public_windows(load_wikitext2("valid"), settings.words)
    cands = candidate_windows(load_wikitext2("test"), settings.words, seed)
    s = settings
    half = s.n_calibration // 2
    need = s.n_members + s.n_nonmembers + 2 * half
    if len(cands) < need:
        raise ConfigError(f"WikiText-2 test gives {len(cands)} candidate windows, {need} needed")
    mem, non = cands[: s.n_members], cands[s.n_members : s.n_members + s.n_nonmembers]
    rest = cands[s.n_members + s.n_nonmembers : need]
    cal_mem, cal_non = rest[:half], rest[half:]
    rng = random.Random(seed + 1)
    test = [(t, True) for t in mem] + [(t, False) for t in non]
    rng.shuffle(test)
    split = MembershipSplit(
        tuple(t for t, _ in test),
        tuple(m for _, m in test),
        tuple(cal_mem + cal_non),
        tuple([True] * len(cal_mem) + [False] * len(cal_non)),
    )
    return public, mem + cal_mem, split


def build_target(
    settings: TargetSettings, seed: int = 0, progress: Progress | None = None
) -> tuple[LanguageModelRelease, MembershipSplit]:
    """Pre-train the public base model, fine-tune the release on the members, record the split.

    Returns:
        the release (fine-tuned model, with the base as reference) and the split.
    """
    public, members, split = _take(settings, seed)
    tok = train_word_tokenizer(public + list(split.all_texts), settings.vocab_size, seed)
    base = tiny_causal_lm(
        tok,
        n_layer=settings.n_layer,
        n_embd=settings.n_embd,
        n_head=settings.n_head,
        max_length=settings.max_length,
        seed=seed,
    )
    if settings.pretrain_steps:
        fine_tune(
            base,
            public,
            settings.pretrain_steps,
            settings.lr,
            settings.batch_size,
            seed=seed,
            progress=progress,
        )
    target = LanguageModel(
        copy.deepcopy(base.module), tok, "causal", "tiny-gpt2-finetuned", base.spec
    )
    rng = random.Random(seed + 2)
    n_public = round(len(members) * (1 - settings.member_share) / settings.member_share)
    mix = members + rng.sample(public, min(len(public), n_public))
    fine_tune(
        target,
        mix,
        settings.finetune_steps,
        settings.finetune_lr,
        settings.batch_size,
        seed=seed + 3,
        progress=progress,
    )
    return LanguageModelRelease(model=target, reference=base), split
