"""An open-weight language model as a release: the fine-tuned model the adversary downloads, and
optionally the public model it was fine-tuned from (the reference for the reference-ratio score
and the starting point every user of the base model has anyway)."""

from __future__ import annotations

from dataclasses import dataclass

from trainleak.errors import ConfigError
from trainleak.models.language import LanguageModel
from trainleak.releases.base import Release


@dataclass(frozen=True)
class LanguageModelRelease(Release):
    """Open weights of a causal language model.

    Attributes:
        model: the released (fine-tuned) model with its tokenizer.
        reference: the public base model, when the adversary has it.
    """

    model: LanguageModel
    reference: LanguageModel | None = None

    def __post_init__(self) -> None:
        if self.model.kind != "causal":
            raise ConfigError("a LanguageModelRelease holds a causal language model")
        if self.reference is not None and len(self.reference.tokenizer) != len(
            self.model.tokenizer
        ):
            raise ConfigError("the reference model must share the released model's tokenizer")

    def describe(self) -> str:
        ref = f", reference {self.reference.name}" if self.reference is not None else ""
        return f"LanguageModelRelease({self.model.name}{ref})"
