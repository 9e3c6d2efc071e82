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

from trainleak.errors import DataNotFoundError, MalformedFileError, MetadataError, SpecMismatchError
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
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MalformedFileError(path, "", f"not valid JSON ({exc})") from None
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
