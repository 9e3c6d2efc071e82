"""The :class:`TransformerUpdate` release: one FedSGD step of a transformer language model.

The honest-but-curious server knows the broadcast model (weights, embedding table, tokenizer)
and receives the gradient of the client's mean loss over one batch of ``B`` token sequences of
at most ``n`` tokens: a classification loss for encoders, the next-token loss for decoders.
The model is any object with the fields of the language-model substrate's ``LanguageModel``
(``module``, ``tokenizer``, ``kind``, ``name``); this module only reads them.

References:
    McMahan et al., *Communication-Efficient Learning of Deep Networks from Decentralized
    Data*, AISTATS 2017 (FedSGD). Petrov, Dimitrov, Baader, Mueller, Vechev, *DAGER: Exact
    Gradient Inversion for Large Language Models*, NeurIPS 2024 (the threat model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch

from trainleak.errors import ConfigError, ShapeError
from trainleak.releases.base import Release
from trainleak.validation import check_fields, param

ModelKind = Literal["causal", "encoder"]


class LanguageModelLike(Protocol):
    """What the release needs of a language model (the substrate's ``LanguageModel``)."""

    @property
    def module(self) -> torch.nn.Module: ...

    @property
    def tokenizer(self) -> Any: ...

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class TransformerUpdate(Release):
    """One client's FedSGD gradient of a transformer, and the model it was computed at.

    Attributes:
        model: the broadcast language model (its ``module`` holds the weights the gradient was
            taken at; ``kind`` is ``"encoder"`` or ``"causal"``).
        update: gradient of the mean loss, by parameter name (a subset of the module's).
        max_length: ``n``, the longest sequence the client may send (in tokens, special tokens
            included).
        batch_size: ``B``, the number of sequences behind the update, when the server knows it.

    Raises:
        ShapeError: an update entry names no parameter of the model or has another shape
            (a gradient from a different model).
        ConfigError: non-finite entries; a tokenizer with more tokens than the embedding table
            has rows; an unknown model kind.
    """

    model: LanguageModelLike
    update: dict[str, torch.Tensor]
    max_length: int = param(ge=2, integer=True)
    batch_size: int | None = param(None, ge=1, integer=True)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.model.kind not in ("causal", "encoder"):
            raise ConfigError.invalid("model.kind", "'causal' or 'encoder'", self.model.kind)
        check_tokenizer(self.model)
        _check_update(self.model.module, self.update)

    @property
    def kind(self) -> ModelKind:
        """``"encoder"`` or ``"causal"``."""
        return "encoder" if self.model.kind == "encoder" else "causal"

    @property
    def n_values(self) -> int:
        """Number of scalars in the update."""
        return sum(int(v.numel()) for v in self.update.values())

    def describe(self) -> str:
        b = "unknown B" if self.batch_size is None else f"B={self.batch_size}"
        return (
            f"TransformerUpdate({self.model.name}, {self.kind}, {b}, n<={self.max_length}, "
            f"{self.n_values} values)"
        )


def end_token(tokenizer: Any, kind: str) -> int:
    """The token that closes a sequence: ``[SEP]`` (else EOS) for encoders, EOS for decoders.

    Raises:
        ConfigError: the tokenizer has no such token.
    """
    end = tokenizer.sep_token_id if kind == "encoder" else None
    end = end if end is not None else tokenizer.eos_token_id
    if end is None:
        raise ConfigError("the tokenizer has no end-of-sequence (or [SEP]) token")
    return int(end)


def check_tokenizer(model: LanguageModelLike) -> None:
    """Refuse a tokenizer that does not fit the model's input embedding table."""
    table = model.module.get_input_embeddings()  # type: ignore[operator]
    rows = int(table.weight.shape[0])  # type: ignore[union-attr]
    size = len(model.tokenizer)
    if size > rows:
        raise ConfigError(
            f"the tokenizer has {size} tokens but the embedding table of {model.name!r} has "
            f"{rows} rows: the tokenizer does not belong to this model"
        )


def _check_update(module: torch.nn.Module, update: dict[str, torch.Tensor]) -> None:
    if not update:
        raise ConfigError("the update is empty")
    params = dict(module.named_parameters())
    for name, g in update.items():
        if name not in params:
            raise ShapeError(
                f"update entry {name!r} names no parameter of the model: the gradient comes "
                "from a different model"
            )
        if tuple(g.shape) != tuple(params[name].shape):
            raise ShapeError(
                f"update entry {name!r} has shape {tuple(g.shape)}, the model's parameter has "
                f"{tuple(params[name].shape)}: the gradient comes from a different model"
            )
        if not bool(torch.isfinite(g).all()):
            raise ConfigError(f"update entry {name!r} has NaN or infinite values")
