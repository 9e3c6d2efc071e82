"""What a language model is here: a transformers module, its tokenizer and a serialisable spec.

:class:`LanguageModel` bundles a Hugging Face ``PreTrainedModel`` (causal LM or encoder) with the
tokenizer that belongs to it; :class:`LanguageModelSpec` is what :func:`save_language_model
<trainleak.models.language.files.save_language_model>` writes next to the weights. ``blocks`` and
``embedding`` give the transformer blocks and the input embedding of either family, which split
learning and per-layer gradient attacks cut at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from trainleak.errors import ConfigError

Kind = Literal["causal", "encoder"]
KINDS: tuple[str, ...] = ("causal", "encoder")
FAMILIES: tuple[str, ...] = ("gpt2", "llama", "bert")


@dataclass(frozen=True)
class LanguageModelSpec:
    """A serialisable description of a language model.

    Attributes:
        family: the transformers ``model_type`` (``"gpt2"``, ``"llama"``, ``"bert"``).
        config: the transformers config as a JSON-serialisable dict (``config.to_dict()``).
        tokenizer: where the tokenizer came from (``"trained"``, ``"smollm2-gguf"``,
            ``"all-minilm-l6-v2"``); the saved ``tokenizer.json`` is what reloads it.
        max_length: the context window used for encoding (tokens, special tokens included).
        special_tokens: the tokenizer's special tokens by role (``pad``, ``unk``, ``bos``, ...).
    """

    family: str
    config: dict[str, Any]
    tokenizer: str
    max_length: int
    special_tokens: dict[str, str] = field(default_factory=dict)


@dataclass
class LanguageModel:
    """A transformers module with its tokenizer.

    Attributes:
        module: a ``PreTrainedModel``: a causal LM (``...ForCausalLM``) or an encoder
            (``BertModel`` or ``BertForSequenceClassification``).
        tokenizer: its tokenizer; a pad token is always set.
        kind: ``"causal"`` or ``"encoder"``.
        name: a human-readable name (``"smollm2-135m"``, ``"tiny-gpt2"``).
        spec: the serialisable spec.
    """

    module: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    kind: Kind
    name: str
    spec: LanguageModelSpec

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError.invalid("kind", f"one of {KINDS}", self.kind)
        check_tokenizer(self.module, self.tokenizer)

    @property
    def max_length(self) -> int:
        """The context window used for encoding."""
        return self.spec.max_length


def check_tokenizer(module: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse a tokenizer that does not belong to ``module``: ids beyond the embedding table, or
    no pad token.

    Raises:
        ConfigError: naming the tokenizer size and the model's vocabulary size.
    """
    vocab = vocab_rows(module)
    size = len(tokenizer)
    if size > vocab:
        raise ConfigError(
            f"the tokenizer does not belong to the model: it has {size} tokens but the model's "
            f"embedding table has {vocab} rows"
        )
    if tokenizer.pad_token_id is None:
        raise ConfigError("the tokenizer has no pad token; set tokenizer.pad_token first")


def vocab_rows(module: nn.Module) -> int:
    """Rows of the input embedding table of a transformers model."""
    emb: Any = module.get_input_embeddings()  # type: ignore[operator]
    return int(emb.num_embeddings)


def blocks(lm: LanguageModel) -> list[nn.Module]:
    """The transformer blocks of ``lm``, input side first (GPT-2 ``h``, Llama ``layers``, BERT
    ``encoder.layer``); LoRA-wrapped modules are looked through.

    Raises:
        ConfigError: an architecture whose blocks are not known.
    """
    base = _base_model(lm.module)
    for path in ("h", "layers", "encoder.layer"):
        found: Any = base
        for part in path.split("."):
            found = getattr(found, part, None)
        if isinstance(found, nn.ModuleList):
            return list(found)
    raise ConfigError(f"cannot find the transformer blocks of {type(lm.module).__name__}")


def embedding(lm: LanguageModel) -> nn.Module:
    """The input (token) embedding module of ``lm``."""
    emb: nn.Module = lm.module.get_input_embeddings()
    return emb


def _base_model(module: nn.Module) -> nn.Module:
    inner: Any = module
    # peft's PeftModel -> LoraModel -> the transformers model.
    while hasattr(inner, "get_base_model") and inner.get_base_model() is not inner:
        inner = inner.get_base_model()
    base: nn.Module = getattr(inner, "base_model", inner)
    return base
