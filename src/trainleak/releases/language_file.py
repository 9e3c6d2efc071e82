"""A released causal language model described by a spec file (needs the ``text`` extra).

``{"type": "language_model", "model": "finetuned/", "reference": "base/", "max_length": 128}``:
``model`` is the released (fine-tuned) model's folder, ``reference`` optionally the public model
it was fine-tuned from (the adversary has it too). Each folder is one written by
:func:`~trainleak.models.language.save_language_model` or a Hugging Face folder of a GPT-2 or
Llama model with safetensors weights and ``tokenizer.json``
(:func:`~trainleak.models.language.load_causal_lm_folder`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from trainleak.errors import ConfigError, MetadataError
from trainleak.models.language import load_causal_lm_folder
from trainleak.releases._schema import Strict, resolve
from trainleak.releases.language import LanguageModelRelease


class LanguageModelSchema(Strict):
    format: str = "trainleak.release/1"
    type: str
    model: str
    reference: str | None = None
    max_length: int | None = Field(None, ge=2)
    description: str = ""


def load_language_release(
    s: LanguageModelSchema, spec_file: Path
) -> tuple[LanguageModelRelease, tuple[Path, ...]]:
    """The release and the folders it was read from.

    Raises:
        DataNotFoundError, MalformedFileError, MetadataError: a folder that does not hold a
            causal language model (named), or a reference whose tokenizer differs.
    """
    model_dir = resolve(spec_file, s.model)
    model = load_causal_lm_folder(model_dir, s.max_length)
    folders = [model_dir]
    reference = None
    if s.reference is not None:
        ref_dir = resolve(spec_file, s.reference)
        reference = load_causal_lm_folder(ref_dir, s.max_length)
        folders.append(ref_dir)
    try:
        release = LanguageModelRelease(model=model, reference=reference)
    except ConfigError as exc:
        raise MetadataError(spec_file, "reference", str(exc)) from None
    return release, tuple(folders)
