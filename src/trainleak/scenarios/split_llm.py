"""Split fine-tuning of a language model on private records, attacked from the server's side.

:func:`build_world` makes the public and private data (Faker records with private slots, and
WikiText-2 as public text), a word tokenizer, and a small causal transformer pre-trained on the
public text only (the "public pre-trained model"). :func:`run_defense` trains the split model
with one client defense, records the server's transcript, measures task accuracy through the
protocol and runs each attack on the transcript, scored against the ground truth beside the
equal-budget positional-prior baseline and slot chance (``1 / pool_size``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainleak.attacks.base import Attack
from trainleak.data.records import TEMPLATES, Record, make_records, slot_pools
from trainleak.data.text import load_wikitext2
from trainleak.metrics.split_text import positional_prior, rouge_l, token_recovery
from trainleak.models.language import (
    LanguageModel,
    encode,
    fine_tune,
    tiny_causal_lm,
    train_word_tokenizer,
)
from trainleak.models.split_lm import LMSplit
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_text import TextDefenseSpec, TextSplitTranscript
from trainleak.systems.split_lm import (
    SplitRun,
    SplitTrainingConfig,
    accuracy,
    train_split,
)

Data = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class WorldConfig:
    """Sizes of the data and of the tiny model."""

    n_private: int = 600
    n_test: int = 300
    n_public_records: int = 600
    n_wiki: int = 600
    pool_size: int = 100
    vocab_size: int = 2500
    length: int = 24
    n_layer: int = 4
    n_embd: int = 64
    n_head: int = 4
    pretrain_steps: int = 150
    seed: int = 0


@dataclass
class World:
    """Everything a split-LM scenario needs; ``public_ids`` is what the adversary and the
    client's auxiliary pool share; ``slot_ids`` are the token ids of private slot values."""

    lm: LanguageModel
    train: Data
    test: Data
    public_ids: torch.Tensor
    slot_ids: torch.Tensor
    pool_size: int


def wiki_paragraphs(n: int, words: int = 20) -> list[str]:
    """The first ``n`` WikiText-2 validation paragraphs of more than five words, cut to
    ``words`` words."""
    if n == 0:
        return []
    paras = [p for p in load_wikitext2("valid") if len(p.split()) > 5]
    return [" ".join(p.split()[:words]) for p in paras[:n]]


def encode_records(lm: LanguageModel, records: list[Record], length: int) -> Data:
    """Token ids, masks and template labels of ``records``."""
    enc = encode(lm, [r.text for r in records], length)
    return enc.input_ids, enc.attention_mask, torch.tensor([r.label for r in records])


def build_world(cfg: WorldConfig) -> World:
    """Records (private train and test, public), WikiText-2 paragraphs, tokenizer and the tiny
    causal LM pre-trained on the public text."""
    pools = slot_pools(cfg.pool_size, cfg.seed)
    private = make_records(cfg.n_private + cfg.n_test, pools, seed=cfg.seed + 1)
    public = [r.text for r in make_records(cfg.n_public_records, pools, seed=cfg.seed + 2)]
    public += wiki_paragraphs(cfg.n_wiki)
    # The vocabulary is public: the public texts plus the generator's slot pools.
    tok = train_word_tokenizer([*public, " ".join(pools.words())], cfg.vocab_size, cfg.seed)
    lm = tiny_causal_lm(
        tok,
        n_layer=cfg.n_layer,
        n_embd=cfg.n_embd,
        n_head=cfg.n_head,
        max_length=cfg.length + 16,
        seed=cfg.seed,
    )
    fine_tune(lm, public, cfg.pretrain_steps, 3e-3, 32, seed=cfg.seed, max_length=cfg.length)
    template_words = {w for t in TEMPLATES for w in t.split() if "{" not in w}
    slot_words = [w for w in pools.words() if w not in template_words]
    vocab = tok.get_vocab()
    slot_ids = torch.tensor(sorted({vocab[w] for w in slot_words if w in vocab}))
    return World(
        lm=lm,
        train=encode_records(lm, private[: cfg.n_private], cfg.length),
        test=encode_records(lm, private[cfg.n_private :], cfg.length),
        public_ids=encode(lm, public, cfg.length).input_ids,
        slot_ids=slot_ids,
        pool_size=pools.pool_size,
    )


@dataclass(frozen=True)
class AttackScore:
    """One attack (or the baseline) on one transcript."""

    token_recovery: float
    slot_recovery: float
    rouge_l: float
    slots: int = 0


def score(pred: torch.Tensor, run: SplitRun, slot_ids: torch.Tensor, pad_id: int) -> AttackScore:
    """Score reconstructed ids against the recorded rows' ground truth."""
    truth, real = run.truth.ids, run.truth.real
    sent = run.transcript.mask.bool().clone()
    sent[:, 0] = False
    slots = real & torch.isin(truth, slot_ids)
    return AttackScore(
        token_recovery(pred, truth, real),
        token_recovery(pred, truth, slots),
        rouge_l(pred, truth, sent, real),
        int(slots.sum()),
    )


def baseline_score(world: World, run: SplitRun) -> AttackScore:
    """The positional prior (most frequent public token at each position) at equal budget."""
    length = int(run.truth.ids.shape[1])
    pad = int(world.lm.tokenizer.pad_token_id)
    guess = positional_prior(world.public_ids, length, skip=pad)
    pred = guess.expand(run.truth.ids.shape[0], length).clone()
    return score(pred, run, world.slot_ids, pad)


def run_defense(
    world: World,
    split: LMSplit,
    spec: TextDefenseSpec,
    train_cfg: SplitTrainingConfig,
    seed: int = 0,
) -> tuple[SplitRun, float]:
    """Train the split model with ``spec`` and measure test accuracy through the protocol."""
    run = train_split(world.lm, split, world.train, world.public_ids, spec, train_cfg, seed)
    return run, accuracy(run, world.test, world.public_ids, seed=seed + 1)


def attack_run(
    world: World, run: SplitRun, attack: Attack[TextSplitTranscript], seed: int = 0
) -> AttackScore:
    """Run ``attack`` on the run's transcript with the public ids as knowledge, and score."""
    rec = attack(run.transcript, Knowledge(prior=world.public_ids), seed=seed)
    return score(rec.inputs, run, world.slot_ids, int(world.lm.tokenizer.pad_token_id))
