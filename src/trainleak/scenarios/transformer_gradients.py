"""Transformer gradient inversion: build a client batch from WikiText-2, release its FedSGD
gradient (plain, noised relative to each tensor's RMS, or DP-SGD), run the attacks, score.

The fast cells use the language-model substrate's tiny random models over a word-level
tokenizer trained on the sentences; :func:`trained_like` gives them what a trained model has
and a fresh one lacks for this attack: LayerNorm gains and biases away from (1, 0) (a fresh
LayerNorm is linear up to scale, so sums of token and position embeddings fall in the span)
and, for the encoder, a larger weight scale (at BERT's 0.02 the classifier's gradient reaches
the non-[CLS] tokens only at 1e-5 of its size). Every model runs in float64 in the client so
the noiseless cells isolate the attacks from float32 rounding; the benchmark's pretrained
models run in float32.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from trainleak.attacks.base import Attack
from trainleak.defenses.transformer import RelativeNoise
from trainleak.metrics.text_recovery import TextScores, score_sequences
from trainleak.models.language import (
    LanguageModel,
    tiny_causal_lm,
    tiny_encoder,
    train_word_tokenizer,
)
from trainleak.releases.transformer_update import TransformerUpdate
from trainleak.systems.transformer_clients import (
    TextBatch,
    dpsgd_transformer_update,
    tokenize_batch,
    transformer_update,
)


def trained_like(lm: LanguageModel, seed: int, init_scale: float | None = None) -> LanguageModel:
    """Random LayerNorm affine parameters (and weights re-drawn at ``init_scale``), in float64."""
    g = torch.Generator().manual_seed(seed + 1000)
    module = lm.module
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.Linear | torch.nn.Embedding) and init_scale is not None:
                m.weight.copy_(init_scale * torch.randn(m.weight.shape, generator=g))
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
    module.double().eval()
    return lm


def tiny_models(
    texts: list[str], *, vocab: int, width: int, max_length: int, seed: int
) -> dict[str, LanguageModel]:
    """A 3-block encoder (classification head) and a 2-block GPT-2 decoder over one word
    tokenizer trained on ``texts`` (the encoder's span test needs a block after layer 2)."""
    tok = train_word_tokenizer(texts, vocab, seed)
    enc = tiny_encoder(
        tok, num_labels=2, n_layer=3, hidden=width, heads=2, max_length=max_length, seed=seed
    )
    dec = tiny_causal_lm(tok, n_layer=2, n_embd=width, n_head=2, max_length=max_length, seed=seed)
    return {"encoder": trained_like(enc, seed, 0.1), "decoder": trained_like(dec, seed)}


@dataclass(frozen=True)
class Cell:
    """One attack's scores on one release."""

    attack: str
    scores: TextScores
    seconds: float
    certified: int


def client_release(
    lm: LanguageModel,
    texts: list[str],
    max_length: int,
    *,
    noise: float = 0.0,
    dp: tuple[float, float] | None = None,
    seed: int = 0,
) -> tuple[TextBatch, TransformerUpdate]:
    """The client's batch and its release: plain, noised at ``noise`` x RMS, or DP-SGD with
    ``dp = (clip, noise_multiplier)``."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(2, (len(texts),), generator=g)
    batch = tokenize_batch(lm, texts, max_length, labels=labels)
    if dp is not None:
        rel = dpsgd_transformer_update(
            lm, batch, max_length, clip=dp[0], noise_multiplier=dp[1], generator=g
        )
    else:
        rel = transformer_update(lm, batch, max_length)
    if noise > 0:
        rel = RelativeNoise(noise)(rel, g)
    return batch, rel


def run_attacks(
    batch: TextBatch, release: TransformerUpdate, attacks: dict[str, Attack[TransformerUpdate]]
) -> list[Cell]:
    """Run every attack on ``release`` and score it against the batch's real sequences."""
    cells = []
    for name, attack in attacks.items():
        start = time.perf_counter()
        out = attack(release, seed=0)
        seconds = time.perf_counter() - start
        lengths = out.diagnostics.get("lengths", ())
        rec = [row[:n] for row, n in zip(out.inputs.tolist(), lengths, strict=False)]
        cert = int(out.certified.sum()) if out.certified is not None else 0
        cells.append(Cell(name, score_sequences(rec, batch.sequences()), seconds, cert))
    return cells
