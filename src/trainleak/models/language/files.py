"""A language model on disk: ``weights.safetensors``, ``spec.json`` and ``tokenizer.json``.

Loading validates every field of the spec and the weights against the architecture it builds,
and names the file and the field at fault. Nothing is unpickled.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    PreTrainedTokenizerFast,
)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from trainleak.errors import DataNotFoundError, MalformedFileError, MetadataError, SpecMismatchError
from trainleak.models.language.build import make_lm
from trainleak.models.language.core import FAMILIES, LanguageModel, LanguageModelSpec
from trainleak.models.tensor_files import read_tensor_file

WEIGHTS, SPEC, TOKENIZER = "weights.safetensors", "spec.json", "tokenizer.json"


def save_language_model(lm: LanguageModel, directory: str | Path) -> Path:
    """Write ``lm`` to ``directory`` (created if needed); returns the directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    # Tied weights share storage, which safetensors refuses: store each tensor on its own.
    state = {k: v.detach().contiguous().clone() for k, v in lm.module.state_dict().items()}
    save_file(state, str(d / WEIGHTS))
    doc = {
        "format": "trainleak-language-model",
        "version": 1,
        "kind": lm.kind,
        "name": lm.name,
        **asdict(lm.spec),
    }
    (d / SPEC).write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    backend = getattr(lm.tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise MetadataError(d / TOKENIZER, "", "only fast tokenizers can be saved")
    (d / TOKENIZER).write_text(backend.to_str(), encoding="utf-8")
    return d


def _read_json(path: Path) -> Any:
    """The parsed JSON of ``path``, or a :class:`MalformedFileError` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MalformedFileError(path, "", f"not valid JSON ({exc})") from None


def _field(doc: dict[str, Any], path: Path, name: str, typ: type | tuple[type, ...]) -> Any:
    if name not in doc:
        raise MetadataError(path, name, "missing")
    value = doc[name]
    if not isinstance(value, typ) or isinstance(value, bool):
        raise MetadataError(path, name, f"expected {typ}, found {value!r}")
    return value


def _read_spec(path: Path) -> tuple[dict[str, Any], LanguageModelSpec]:
    if not path.is_file():
        raise DataNotFoundError(f"{path} does not exist (not a saved language model folder)")
    doc = _read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != "trainleak-language-model":
        raise MetadataError(path, "format", "expected 'trainleak-language-model'")
    kind = _field(doc, path, "kind", str)
    if kind not in ("causal", "encoder"):
        raise MetadataError(path, "kind", f"expected 'causal' or 'encoder', found {kind!r}")
    family = _field(doc, path, "family", str)
    if family not in FAMILIES:
        raise MetadataError(path, "family", f"expected one of {FAMILIES}, found {family!r}")
    config = _field(doc, path, "config", dict)
    if config.get("model_type") != family:
        raise MetadataError(path, "config.model_type", f"expected {family!r}")
    max_length = _field(doc, path, "max_length", int)
    if max_length < 2:
        raise MetadataError(path, "max_length", f"expected an integer >= 2, found {max_length}")
    specials = _field(doc, path, "special_tokens", dict)
    if "pad" not in specials or not all(isinstance(v, str) for v in specials.values()):
        raise MetadataError(path, "special_tokens", "expected string tokens including 'pad'")
    spec = LanguageModelSpec(
        family, config, str(_field(doc, path, "tokenizer", str)), max_length, specials
    )
    return doc, spec


def load_language_model(directory: str | Path) -> LanguageModel:
    """Read a folder written by :func:`save_language_model`.

    Raises:
        DataNotFoundError: a missing file.
        MetadataError / MalformedFileError: a bad ``spec.json`` or ``tokenizer.json`` (file and
            field named).
        SpecMismatchError: weights that do not match the architecture the spec builds.
        UnsafeFileError: weights that are a pickle.
    """
    d = Path(directory)
    doc, spec = _read_spec(d / SPEC)
    config_doc = {k: v for k, v in spec.config.items() if k != "model_type"}
    try:
        config = AutoConfig.for_model(spec.family, **config_doc)
    except (TypeError, ValueError) as exc:
        raise MetadataError(
            d / SPEC, "config", f"not a valid {spec.family} config ({exc})"
        ) from None
    if doc["kind"] == "causal":
        module = AutoModelForCausalLM.from_config(config)
    elif any("ForSequenceClassification" in a for a in config.architectures or []):
        module = AutoModelForSequenceClassification.from_config(config)
    else:
        module = AutoModel.from_config(config)
    state = read_tensor_file(d / WEIGHTS)
    expected = module.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    bad = [k for k in expected if k in state and state[k].shape != expected[k].shape]
    if missing or extra or bad:
        raise SpecMismatchError(
            d / WEIGHTS,
            (missing + extra + bad)[0],
            f"weights do not match the spec: {len(missing)} missing, "
            f"{len(extra)} unexpected, {len(bad)} of the wrong shape",
        )
    module.load_state_dict(state, strict=True)
    module.eval()
    tok_path = d / TOKENIZER
    if not tok_path.is_file():
        raise DataNotFoundError(f"{tok_path} does not exist")
    try:
        backend = Tokenizer.from_str(tok_path.read_text(encoding="utf-8"))
    except Exception as exc:  # the tokenizers library raises its own Exception subclass
        raise MalformedFileError(tok_path, "", f"not a tokenizers JSON file ({exc})") from None
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, **{f"{r}_token": t for r, t in spec.special_tokens.items()}
    )
    tok.padding_side = "right"
    return LanguageModel(module, tok, doc["kind"], str(doc.get("name", spec.family)), spec)


HF_CONFIG, HF_TOKENIZER = "config.json", "tokenizer.json"
CAUSAL_FAMILIES = ("gpt2", "llama")


def load_causal_lm_folder(directory: str | Path, max_length: int | None = None) -> LanguageModel:
    """A causal language model from a folder: one written by :func:`save_language_model`
    (``spec.json``), or a Hugging Face folder (``config.json`` of a GPT-2 or Llama model, its
    weights as ``*.safetensors``, the fast tokenizer's ``tokenizer.json``), read offline and
    without unpickling anything (``use_safetensors``; a ``pytorch_model.bin`` is refused).

    Args:
        directory: the folder.
        max_length: the context window used for encoding (default: the spec's, or the
            config's ``n_positions`` / ``max_position_embeddings``, at most 2048).

    Raises:
        DataNotFoundError: the folder holds neither ``spec.json`` nor ``config.json``, or no
            safetensors weights or ``tokenizer.json``.
        MetadataError: an encoder, or a family other than GPT-2 and Llama.
        MalformedFileError: an unreadable config or tokenizer.
    """
    d = Path(directory)
    if (d / SPEC).is_file():
        lm = load_language_model(d)
        if lm.kind != "causal":
            raise MetadataError(d / SPEC, "kind", "expected a causal language model")
        return lm
    config_path = d / HF_CONFIG
    if not config_path.is_file():
        raise DataNotFoundError(
            f"{d} holds neither {SPEC} (a trainleak language model) nor {HF_CONFIG} (a Hugging "
            "Face model folder)"
        )
    doc = _read_json(config_path)
    family = doc.get("model_type") if isinstance(doc, dict) else None
    if family not in CAUSAL_FAMILIES or family not in CONFIG_MAPPING:
        raise MetadataError(
            config_path, "model_type", f"expected one of {CAUSAL_FAMILIES}, found {family!r}"
        )
    if not any(p.suffix == ".safetensors" for p in d.iterdir()):
        raise DataNotFoundError(
            f"{d} has no *.safetensors weights (pickled weights such as pytorch_model.bin are "
            "not read)"
        )
    tok_path = d / HF_TOKENIZER
    if not tok_path.is_file():
        raise DataNotFoundError(f"{tok_path} does not exist (a fast tokenizer is needed)")
    try:
        module = AutoModelForCausalLM.from_pretrained(
            str(d), local_files_only=True, use_safetensors=True, trust_remote_code=False
        )
    except (OSError, ValueError, RuntimeError) as exc:
        raise MalformedFileError(d, "", f"the weights do not load ({exc})") from None
    try:
        backend = Tokenizer.from_str(tok_path.read_text(encoding="utf-8"))
    except Exception as exc:  # the tokenizers library raises its own Exception subclass
        raise MalformedFileError(tok_path, "", f"not a tokenizers JSON file ({exc})") from None
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, **_special_tokens(d))
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise MetadataError(tok_path, "", "the tokenizer has neither a pad nor an EOS token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    config = module.config
    window = max_length or min(
        2048, int(getattr(config, "n_positions", 0) or config.max_position_embeddings)
    )
    return make_lm(module, tok, name=d.name, tokenizer_ref=str(tok_path), max_length=window)


def _special_tokens(d: Path) -> dict[str, str]:
    """The special tokens a Hugging Face folder names, in ``special_tokens_map.json`` or
    ``tokenizer_config.json`` (the first that names a role wins)."""
    out: dict[str, str] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = d / name
        if not path.is_file():
            continue
        doc = _read_json(path)
        for key, value in doc.items() if isinstance(doc, dict) else ():
            token = value.get("content") if isinstance(value, dict) else value
            if key.endswith("_token") and isinstance(token, str):
                out.setdefault(key, token)
    return out
