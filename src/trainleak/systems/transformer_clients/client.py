"""One FedSGD step of a transformer client on a batch of text, plain or DP-SGD.

Encoders (``kind="encoder"``) are fine-tuned for sequence classification: the tokenizer adds its
special tokens (``[CLS] ... [SEP]``; a tokenizer without ``[SEP]`` gets its EOS appended) and
the loss is the mean cross-entropy of the labels.
Decoders (``kind="causal"``) take the mean next-token loss; each sequence ends with the
tokenizer's end-of-sequence token, as in language-model fine-tuning on separate documents
(the final position of a causal sequence feeds no loss term, so the EOS there keeps every text
token in the gradient). Sequences are cut at ``max_length`` tokens and padded on the right with
an attention mask; padded positions carry no loss. Dropout is off (``eval()``), as in the
attacks' threat model (Petrov et al., *DAGER*, NeurIPS 2024).

References:
    Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016 (DP-SGD).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trainleak.errors import ConfigError
from trainleak.releases.transformer_update import (
    LanguageModelLike,
    TransformerUpdate,
    check_tokenizer,
    end_token,
)


@dataclass(frozen=True)
class TextBatch:
    """A tokenised batch: ids and mask ``(B, L)``, and the loss targets.

    ``targets`` are class labels ``(B,)`` for encoders, next-token labels ``(B, L)`` (``-100``
    at padding) for decoders. ``lengths`` are the real lengths, special tokens included.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    lengths: tuple[int, ...]

    def sequences(self) -> list[list[int]]:
        """The real token ids of each sequence, without padding."""
        return [self.input_ids[b, :n].tolist() for b, n in enumerate(self.lengths)]


def tokenize_batch(
    lm: LanguageModelLike,
    texts: list[str],
    max_length: int,
    labels: torch.Tensor | None = None,
) -> TextBatch:
    """Tokenise ``texts`` the way the client does (see the module docstring).

    Raises:
        ConfigError: no texts, ``max_length < 2``, labels missing or of the wrong length for
            an encoder, or a tokenizer that does not match the embedding table.
    """
    if not texts or max_length < 2:
        raise ConfigError("tokenize_batch needs at least one text and max_length >= 2")
    check_tokenizer(lm)
    tok = lm.tokenizer
    if lm.kind == "encoder" and (labels is None or labels.shape != (len(texts),)):
        raise ConfigError.invalid("labels", f"a tensor of {len(texts)} class labels", labels)
    end = end_token(tok, lm.kind)
    if lm.kind == "encoder":
        seqs = [tok(t)["input_ids"] for t in texts]
        seqs = [(s if s and s[-1] == end else s + [end]) for s in seqs]
        seqs = [s[: max_length - 1] + [end] if len(s) > max_length else s for s in seqs]
    else:
        seqs = [
            tok(t, add_special_tokens=False)["input_ids"][: max_length - 1] + [end] for t in texts
        ]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), int(pad), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.tensor(s)
        mask[b, : len(s)] = 1
    if lm.kind == "encoder":
        targets = labels if labels is not None else torch.zeros(0)
    else:
        targets = ids.masked_fill(mask == 0, -100)
    return TextBatch(ids, mask, targets.long(), tuple(len(s) for s in seqs))


def _loss(lm: LanguageModelLike, batch: TextBatch) -> torch.Tensor:
    out = lm.module(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=batch.targets
    )
    return out.loss


def _grads(lm: LanguageModelLike, batch: TextBatch) -> dict[str, torch.Tensor]:
    module = lm.module
    module.eval()
    params = {k: p for k, p in module.named_parameters() if p.requires_grad}
    loss = _loss(lm, batch)
    grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    return {
        k: (g if g is not None else torch.zeros_like(p)).detach()
        for (k, p), g in zip(params.items(), grads, strict=True)
    }


def transformer_update(
    lm: LanguageModelLike, batch: TextBatch, max_length: int
) -> TransformerUpdate:
    """The FedSGD release: the gradient of the batch's mean loss at the model's weights."""
    return TransformerUpdate(
        lm, _grads(lm, batch), batch_size=len(batch.lengths), max_length=max_length
    )


def _row(batch: TextBatch, b: int) -> TextBatch:
    n = batch.lengths[b]
    tgt = batch.targets[b : b + 1] if batch.targets.ndim == 1 else batch.targets[b : b + 1, :n]
    return TextBatch(batch.input_ids[b : b + 1, :n], batch.attention_mask[b : b + 1, :n], tgt, (n,))


def dpsgd_transformer_update(
    lm: LanguageModelLike,
    batch: TextBatch,
    max_length: int,
    *,
    clip: float,
    noise_multiplier: float,
    generator: torch.Generator,
) -> TransformerUpdate:
    """DP-SGD release: per-sequence gradients clipped to ``clip`` in l2, summed, Gaussian noise
    of standard deviation ``noise_multiplier * clip`` added, divided by ``B`` (Abadi et al.).

    Raises:
        ConfigError: ``clip <= 0`` or ``noise_multiplier < 0``.
    """
    if not (clip > 0 and math.isfinite(clip)) or not noise_multiplier >= 0:
        raise ConfigError("DP-SGD needs clip > 0 and noise_multiplier >= 0")
    total: dict[str, torch.Tensor] = {}
    for b in range(len(batch.lengths)):
        g = _grads(lm, _row(batch, b))
        norm = math.sqrt(sum(float((v.double() ** 2).sum()) for v in g.values()))
        scale = min(1.0, clip / max(norm, 1e-30))
        for k, v in g.items():
            total[k] = total.get(k, torch.zeros_like(v)) + scale * v
    n = len(batch.lengths)
    noisy = {
        k: (v + noise_multiplier * clip * torch.randn(v.shape, generator=generator)) / n
        for k, v in total.items()
    }
    return TransformerUpdate(lm, noisy, batch_size=n, max_length=max_length)
