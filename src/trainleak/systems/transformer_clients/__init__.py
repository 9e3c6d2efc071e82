"""Federated clients of transformer language models: one FedSGD step on a batch of text,
plain or with DP-SGD (per-sample clipping and Gaussian noise)."""

from trainleak.systems.transformer_clients.client import (
    TextBatch,
    dpsgd_transformer_update,
    tokenize_batch,
    transformer_update,
)
from trainleak.systems.transformer_clients.text import wikitext_sentences

__all__ = [
    "TextBatch",
    "dpsgd_transformer_update",
    "tokenize_batch",
    "transformer_update",
    "wikitext_sentences",
]
