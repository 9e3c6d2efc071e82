"""A tiny split-LM world and transcripts shared by the split-LM tests and conformance cases
(built once per process; a few seconds)."""

from __future__ import annotations

from functools import lru_cache

from trainleak.models.split_lm import LMSplit
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_text import TextDefenseSpec, TextSplitTranscript
from trainleak.scenarios.split_llm import World, WorldConfig, build_world
from trainleak.systems.split_lm import SplitRun, SplitTrainingConfig, train_split

TINY = WorldConfig(
    n_private=96,
    n_test=48,
    n_public_records=160,
    n_wiki=0,
    pool_size=8,
    vocab_size=200,
    length=20,
    n_layer=3,
    n_embd=32,
    pretrain_steps=40,
)
SPLIT = LMSplit(1, 2)
FAST = SplitTrainingConfig(steps=6, batch_size=8, record_rows=32, calib_steps=10, refit_steps=0)
MIXGUARD = TextDefenseSpec(kind="mixguard", n_insert=2, n_aux=2, signs=True, grad_noise=1.0)


@lru_cache(maxsize=1)
def tiny_world() -> World:
    return build_world(TINY)


@lru_cache(maxsize=4)
def tiny_run(kind: str = "none") -> SplitRun:
    spec = MIXGUARD if kind == "mixguard" else TextDefenseSpec()
    w = tiny_world()
    return train_split(w.lm, SPLIT, w.train, w.public_ids, spec, FAST, seed=0)


def tiny_text_transcript(kind: str = "none") -> tuple[TextSplitTranscript, Knowledge]:
    w = tiny_world()
    return tiny_run(kind).transcript, Knowledge(prior=w.public_ids)
