"""Loading a user's own release from files, with everything validated before any attack runs.

A release is described by a small JSON spec (``release.json``) next to its tensor files::

    {
      "type": "checkpoint",
      "architecture": {"kind": "homogeneous_mlp",
                       "kwargs": {"input_shape": [1, 8, 8], "hidden": [1000], "out_dim": 1}},
      "weights": "weights.safetensors",
      "initial_weights": null,
      "tensor_names": {"layers.0.weight": "0.weight", "layers.1.weight": "2.weight"},
      "dtype": "float32",
      "optimizer": {"name": "gd", "lr": 0.5},
      "training": {"loss": "logistic", "steps": 20000, "n_train": 100},
      "dp_sgd": null
    }

or, for one federated client's update, ``"type": "gradient_update"`` with ``"parameters"`` (the
broadcast weights), ``"update"`` (the gradient, or the weight change for ``"update_kind":
"delta"``), ``"batch_size"``, ``"local_steps"`` and ``"learning_rate"``. Tensor files are
safetensors, or torch zip files read with ``weights_only=True``; pickles are refused. The
directories written by :meth:`Checkpoint.save` and :meth:`GradientUpdate.save` load too.

A published distilled (synthetic) data set is ``"type": "distilled_set"`` with ``"set"`` (one
tensor file holding the images ``(N, C, H, W)`` and their hard ``(N,)`` or soft ``(N, K)``
labels, named ``images`` and ``labels`` unless ``tensor_names`` maps them), ``"num_classes"``,
``"value_range"`` and, if the method publishes one, the learned ``"lr"``; the folder written
by :meth:`DistilledSet.save` (``set.json``) loads too. So does the folder a split-learning
server's transcript was saved to (:meth:`SplitTranscript.save`, ``transcript.json``): what an
honest-but-curious server recorded of U-shaped split learning on images. A white-box
classifier whose classes are private (:meth:`ClassifierRelease.save`: ``release.json`` of format
``trainleak.classifier/1`` beside ``weights.safetensors``) loads as it is.

``dp_sgd`` (``sampling_rate``, ``noise_multiplier``, ``steps``, optionally ``delta``) declares
that the weights came out of DP-SGD with that schedule; it is what lets the assessment apply
the DP reconstruction bounds.

Every failure is a :class:`~trainleak.errors.ReleaseFileError` naming the file and the field:
malformed JSON, unknown or mistyped keys (:class:`MetadataError`), a truncated or lying
safetensors header (:class:`MalformedFileError`), NaN or infinite weights
(:class:`NonFiniteWeightsError`), tensors that do not fit the spec (:class:`SpecMismatchError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from trainleak._discovery import optional_module
from trainleak.errors import (
    ConfigError,
    MetadataError,
    MissingExtraError,
    ShapeError,
    SpecMismatchError,
)
from trainleak.models.spec import ModelSpec, StateDict
from trainleak.models.tensor_files import read_tensor_file
from trainleak.releases._match import DTYPES, expected_tensors, match_spec, rename
from trainleak.releases._schema import Strict, read_mapping, resolve, validate
from trainleak.releases.checkpoint import Checkpoint, OptimizerSpec, TrainingSpec
from trainleak.releases.classifier import ClassifierRelease
from trainleak.releases.distilled import DistilledSet
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.split_learning import FORMAT as SPLIT_FORMAT
from trainleak.releases.split_learning import SplitTranscript

# a released language model needs the text extra (transformers, tokenizers): its loader is
# imported when present, and a spec of that type names the missing extra otherwise
_TEXT, TEXT_ERROR = optional_module("trainleak.releases.language_file")
LanguageModelRelease: Any = _TEXT.LanguageModelRelease if _TEXT is not None else None

SPEC_FILE = "release.json"
RELEASE_TYPES = ("checkpoint", "gradient_update", "distilled_set", "classifier", "language_model")
DISTILLED_FILE = "set.json"
TRANSCRIPT_FILE = "transcript.json"
CLASSIFIER_FORMAT = "trainleak.classifier/1"
DType = Literal["float16", "bfloat16", "float32", "float64"]


class ArchitectureSchema(Strict):
    kind: str
    kwargs: dict[str, Any] = Field(default_factory=dict)


class OptimizerSchema(Strict):
    name: Literal["gd", "sgd", "adam", "muon", "signum"]
    lr: float = Field(gt=0)
    params: dict[str, Any] = Field(default_factory=dict)


class TrainingSchema(Strict):
    loss: Literal["logistic", "cross_entropy"]
    steps: int = Field(ge=0)
    n_train: int = Field(ge=1)
    batch_size: int | None = Field(None, ge=1)
    final_loss: float | None = None
    min_margin: float | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class DPSGDSchema(Strict):
    sampling_rate: float = Field(gt=0, le=1)
    noise_multiplier: float = Field(gt=0)
    steps: int = Field(ge=1)
    delta: float = Field(1e-5, gt=0, lt=1)


class _Common(Strict):
    format: Literal["trainleak.release/1"] = "trainleak.release/1"
    architecture: ArchitectureSchema
    tensor_names: dict[str, str] = Field(default_factory=dict)
    dtype: DType | None = None
    dp_sgd: DPSGDSchema | None = None
    description: str = ""


class CheckpointSchema(_Common):
    type: Literal["checkpoint"]
    weights: str
    initial_weights: str | None = None
    optimizer: OptimizerSchema | None = None
    training: TrainingSchema | None = None


class UpdateSchema(_Common):
    type: Literal["gradient_update"]
    parameters: str
    update: str
    batch_size: int | None = Field(None, ge=1)
    local_steps: int = Field(1, ge=1)
    learning_rate: float | None = Field(None, gt=0)
    update_kind: Literal["gradient", "delta"] = "gradient"


class DistilledSetSchema(Strict):
    format: Literal["trainleak.release/1"] = "trainleak.release/1"
    type: Literal["distilled_set"]
    set: str
    num_classes: int = Field(ge=2)
    value_range: list[float] = Field(min_length=2, max_length=2)
    lr: float | None = Field(None, gt=0)
    tensor_names: dict[str, str] = Field(default_factory=dict)
    description: str = ""


class ClassifierSchema(Strict):
    format: Literal["trainleak.release/1"] = "trainleak.release/1"
    type: Literal["classifier"]
    architecture: ArchitectureSchema
    weights: str
    tensor_names: dict[str, str] = Field(default_factory=dict)
    dtype: DType | None = None
    classes: list[str] = Field(min_length=2)
    input_shape: list[int] = Field(min_length=3, max_length=3)
    value_range: list[float] = Field([0.0, 1.0], min_length=2, max_length=2)
    description: str = ""


@dataclass(frozen=True)
class DPSGDSpec:
    """The DP-SGD schedule a release declares (Poisson rate q, noise multiplier, steps)."""

    sampling_rate: float
    noise_multiplier: float
    steps: int
    delta: float = 1e-5


@dataclass(frozen=True)
class LoadedRelease:
    """A validated release read from files.

    Attributes:
        release: the :class:`Checkpoint`, :class:`GradientUpdate`, :class:`DistilledSet`,
            :class:`SplitTranscript` or :class:`ClassifierRelease`.
        source: the spec file it was described by.
        files: the tensor files read.
        dp_sgd: the DP-SGD schedule the spec declares, if any.
        description: the spec's free-text description.
    """

    release: Checkpoint | GradientUpdate | DistilledSet | SplitTranscript | ClassifierRelease | Any
    source: Path
    files: tuple[Path, ...]
    dp_sgd: DPSGDSpec | None = None
    description: str = ""

    @property
    def kind(self) -> str:
        """``"checkpoint"``, ``"gradient_update"``, ``"distilled_set"``,
        ``"split_transcript"``, ``"classifier"`` or ``"language_model"``."""
        if LanguageModelRelease is not None and isinstance(self.release, LanguageModelRelease):
            return "language_model"
        if isinstance(self.release, ClassifierRelease):
            return "classifier"
        if isinstance(self.release, DistilledSet):
            return "distilled_set"
        if isinstance(self.release, SplitTranscript):
            return "split_transcript"
        return "checkpoint" if isinstance(self.release, Checkpoint) else "gradient_update"


def spec_path(path: str | Path) -> Path:
    """The spec file of ``path``: the file itself, or ``release.json`` inside a folder (or,
    without one, the ``set.json`` of a :meth:`DistilledSet.save` folder or the
    ``transcript.json`` of a :meth:`SplitTranscript.save` folder)."""
    p = Path(path)
    if p.is_dir() and not (p / SPEC_FILE).exists():
        for name in (DISTILLED_FILE, TRANSCRIPT_FILE):
            if (p / name).exists():
                return p / name
    return p / SPEC_FILE if p.is_dir() else p


def load_release(path: str | Path) -> LoadedRelease:
    """Read and validate the release described by ``path`` (a spec file or its folder).

    Raises:
        DataNotFoundError: the spec or a tensor file does not exist.
        ReleaseFileError: (a subclass naming the file and field) for any invalid content.
        UnsafeFileError: a tensor file is a pickle.
    """
    spec_file = spec_path(path)
    data = read_mapping(spec_file, "release spec")
    if spec_file.name == TRANSCRIPT_FILE:
        return _load_transcript(spec_file, data)
    if data.get("format") == CLASSIFIER_FORMAT:
        return _load_classifier(spec_file)
    prefixes = ("", "")
    if data.get("format") in _SAVED:
        data, prefixes = _from_saved(data)
    kind = data.get("type")
    if kind not in RELEASE_TYPES:
        raise MetadataError(
            spec_file, "type", f"expected one of {list(RELEASE_TYPES)}, received {kind!r}"
        )
    if kind == "checkpoint":
        return _load_checkpoint(validate(CheckpointSchema, data, spec_file), spec_file, prefixes)
    if kind == "distilled_set":
        return _load_distilled(validate(DistilledSetSchema, data, spec_file), spec_file)
    if kind == "classifier":
        return _load_classifier_spec(validate(ClassifierSchema, data, spec_file), spec_file)
    if kind == "language_model":
        if _TEXT is None:
            raise MissingExtraError(f"{spec_file}: a released language model: {TEXT_ERROR}")
        s_lm = validate(_TEXT.LanguageModelSchema, data, spec_file)
        lm, folders = _TEXT.load_language_release(s_lm, spec_file)
        return LoadedRelease(lm, spec_file, folders, None, s_lm.description)
    return _load_update(validate(UpdateSchema, data, spec_file), spec_file, prefixes)


def _tensors(
    spec_file: Path, rel: str, schema: _Common, prefix: str = ""
) -> tuple[Path, StateDict]:
    file = resolve(spec_file, rel)
    tensors = read_tensor_file(file)
    if prefix:
        tensors = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    return file, rename(tensors, schema.tensor_names, file)


def _load_checkpoint(
    s: CheckpointSchema, spec_file: Path, prefixes: tuple[str, str]
) -> LoadedRelease:
    arch = ModelSpec(kind=s.architecture.kind, kwargs=dict(s.architecture.kwargs))
    expected = expected_tensors(arch, spec_file)
    declared = DTYPES[s.dtype] if s.dtype else None
    file, final = _tensors(spec_file, s.weights, s, prefixes[0])
    dtype = match_spec(final, expected, arch, file, declared)
    files, initial = [file], None
    if s.initial_weights is not None:
        init_file, initial = _tensors(spec_file, s.initial_weights, s, prefixes[1])
        if initial or not prefixes[1]:  # a saved checkpoint without initial weights has none
            match_spec(initial, expected, arch, init_file, dtype)
            files.append(init_file)
        initial = initial or None
    opt = s.optimizer
    training = s.training
    release = Checkpoint(
        architecture=arch,
        final=final,
        initial=initial,
        optimizer=OptimizerSpec(opt.name, opt.lr, dict(opt.params)) if opt else None,
        training=TrainingSpec(**training.model_dump()) if training else None,
    )
    return LoadedRelease(release, spec_file, tuple(dict.fromkeys(files)), _dp(s), s.description)


def _load_update(s: UpdateSchema, spec_file: Path, prefixes: tuple[str, str]) -> LoadedRelease:
    arch = ModelSpec(kind=s.architecture.kind, kwargs=dict(s.architecture.kwargs))
    expected = expected_tensors(arch, spec_file)
    declared = DTYPES[s.dtype] if s.dtype else None
    p_file, params = _tensors(spec_file, s.parameters, s, prefixes[0])
    dtype = match_spec(params, expected, arch, p_file, declared)
    u_file, update = _tensors(spec_file, s.update, s, prefixes[1])
    match_spec(update, expected, arch, u_file, dtype)
    if s.local_steps > 1 and s.learning_rate is None:
        raise MetadataError(spec_file, "learning_rate", "required when local_steps > 1")
    try:
        release = GradientUpdate(
            architecture=arch,
            parameters=params,
            update=update,
            batch_size=s.batch_size,
            local_steps=s.local_steps,
            learning_rate=s.learning_rate,
            kind=s.update_kind,
        )
    except (ConfigError, ShapeError) as exc:  # checked above; kept as a file error if not
        raise SpecMismatchError(u_file, "", str(exc)) from None
    files = tuple(dict.fromkeys([p_file, u_file]))
    return LoadedRelease(release, spec_file, files, _dp(s), s.description)


def _load_distilled(s: DistilledSetSchema, spec_file: Path) -> LoadedRelease:
    file = resolve(spec_file, s.set)
    tensors = read_tensor_file(file)
    names = {k: s.tensor_names.get(k, k) for k in ("images", "labels")}
    unknown = sorted(set(s.tensor_names) - set(names))
    if unknown:
        raise MetadataError(
            spec_file, "tensor_names", f"maps only 'images' and 'labels', not {unknown}"
        )
    for key, name in names.items():
        if name not in tensors:
            raise SpecMismatchError(
                file, name, f"no tensor {name!r} ({key}); found {sorted(tensors)}"
            )
    lo, hi = s.value_range
    try:
        release = DistilledSet(
            images=tensors[names["images"]],
            labels=tensors[names["labels"]],
            num_classes=s.num_classes,
            value_range=(lo, hi),
            lr=s.lr,
        )
    except (ConfigError, ShapeError) as exc:
        field = names["labels"] if "label" in str(exc) else names["images"]
        raise SpecMismatchError(file, field, str(exc)) from None
    return LoadedRelease(release, spec_file, (file,), None, s.description)


def _load_transcript(spec_file: Path, data: dict[str, Any]) -> LoadedRelease:
    """A folder written by :meth:`SplitTranscript.save` (image split learning only)."""
    if data.get("format") != SPLIT_FORMAT:
        raise MetadataError(
            spec_file,
            "format",
            f"assess reads image split-learning transcripts ({SPLIT_FORMAT!r}), received "
            f"{data.get('format')!r} (a split language model's transcript is attacked by "
            "`trainleak run split-llm-mixguard`)",
        )
    try:
        release = SplitTranscript.load(spec_file.parent)
    except (ConfigError, ShapeError, KeyError, TypeError) as exc:
        raise SpecMismatchError(spec_file, "", f"{type(exc).__name__}: {exc}") from None
    files = (spec_file.parent / "transcript.safetensors",)
    return LoadedRelease(release, spec_file, files)


def _load_classifier(spec_file: Path) -> LoadedRelease:
    """A folder written by :meth:`ClassifierRelease.save`."""
    try:
        release = ClassifierRelease.load(spec_file.parent)
    except (ConfigError, ShapeError, KeyError, TypeError) as exc:
        raise SpecMismatchError(spec_file, "", f"{type(exc).__name__}: {exc}") from None
    return LoadedRelease(release, spec_file, (spec_file.parent / "weights.safetensors",))


def _load_classifier_spec(s: ClassifierSchema, spec_file: Path) -> LoadedRelease:
    """A classifier described by a spec: the weights checked against the architecture, then
    the output size against the class list, the input shape and the range."""
    arch = ModelSpec(kind=s.architecture.kind, kwargs=dict(s.architecture.kwargs))
    expected = expected_tensors(arch, spec_file)
    declared = DTYPES[s.dtype] if s.dtype else None
    file = resolve(spec_file, s.weights)
    state = rename(read_tensor_file(file), s.tensor_names, file)
    match_spec(state, expected, arch, file, declared)
    lo, hi = s.value_range
    try:
        release = ClassifierRelease(
            spec=arch,
            state=state,
            classes=tuple(s.classes),
            input_shape=(s.input_shape[0], s.input_shape[1], s.input_shape[2]),
            value_range=(lo, hi),
        )
    except ShapeError as exc:
        raise MetadataError(spec_file, "input_shape", str(exc)) from None
    except ConfigError as exc:  # the range, or the network's output size against the classes
        field = "value_range" if "value_range" in str(exc) else "classes"
        raise MetadataError(spec_file, field, str(exc)) from None
    except RuntimeError as exc:  # the forward pass of a zero input of that shape failed
        raise MetadataError(
            spec_file,
            "input_shape",
            f"the architecture cannot take inputs of shape {tuple(s.input_shape)}: {exc}",
        ) from None
    return LoadedRelease(release, spec_file, (file,), None, s.description)


def _dp(s: _Common) -> DPSGDSpec | None:
    d = s.dp_sgd
    return DPSGDSpec(d.sampling_rate, d.noise_multiplier, d.steps, d.delta) if d else None


_SAVED = ("trainleak.checkpoint/1", "trainleak.gradient_update/1", "trainleak.distilled/1")


def _from_saved(data: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, str]]:
    """Translate the ``release.json`` of :meth:`Checkpoint.save` / :meth:`GradientUpdate.save`
    (one tensor file, the two tensor sets under prefixes) into a spec and its prefixes."""
    rest = {k: v for k, v in data.items() if k != "format"}
    if data["format"] == "trainleak.distilled/1":
        return {"type": "distilled_set", "set": "set.safetensors", **rest}, ("", "")
    if data["format"] == "trainleak.checkpoint/1":
        spec = {"type": "checkpoint", "weights": "weights.safetensors"}
        spec["initial_weights"] = "weights.safetensors"
        spec.update({k: v for k, v in rest.items() if v is not None})
        return spec, ("final.", "initial.")
    spec = {"type": "gradient_update", "parameters": "update.safetensors"}
    spec["update"] = "update.safetensors"
    if "kind" in rest:
        rest["update_kind"] = rest.pop("kind")
    spec.update({k: v for k, v in rest.items() if v is not None})
    return spec, ("parameters.", "update.")
