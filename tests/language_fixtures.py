"""Tiny random BERT and GPT-2 language models with a word-level tokenizer, for fast tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
)

WORDS = (
    "the a of and to in is was for on with as by at from his her it that this "
    "film series game song album river city war team season year first new old "
    "played wrote built opened moved won lost began ended"
).split()


@dataclass(frozen=True)
class TinyLM:
    module: torch.nn.Module
    tokenizer: Any
    kind: str
    name: str


def word_tokenizer(kind: str) -> PreTrainedTokenizerFast:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] if kind == "encoder" else ["<pad>", "<eos>"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=specials[1]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if kind == "encoder":
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
            cls_token="[CLS]", sep_token="[SEP]",
        )
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")


def _trained_norms(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Random LayerNorm gains and biases: a freshly initialised LayerNorm (gain 1, bias 0) is
    linear up to scale, which makes E[v] + P[t] combinations fall in the span (a trained
    model's are not)."""
    g = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
    return module


def tiny_bert(seed: int = 0, hidden: int = 64, layers: int = 3) -> TinyLM:
    tok = word_tokenizer("encoder")
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=32,
        num_labels=2, hidden_dropout_prob=0.0, initializer_range=0.1, attention_probs_dropout_prob=0.0,
    )
    model = _trained_norms(BertForSequenceClassification(cfg), seed)
    return TinyLM(model.eval(), tok, "encoder", "tiny-bert")


def tiny_gpt2(seed: int = 0, hidden: int = 64, layers: int = 2) -> TinyLM:
    tok = word_tokenizer("causal")
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=len(tok), n_embd=hidden, n_layer=layers, n_head=2, n_positions=32,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        eos_token_id=1, bos_token_id=1, pad_token_id=0,
    )
    model = _trained_norms(GPT2LMHeadModel(cfg), seed)
    return TinyLM(model.eval(), tok, "causal", "tiny-gpt2")


def random_texts(count: int, seed: int, low: int = 3, high: int = 6) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        n = int(torch.randint(low, high + 1, (1,), generator=g))
        out.append(" ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (n,), generator=g)))
    return out
