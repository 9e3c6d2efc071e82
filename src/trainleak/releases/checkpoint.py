"""The :class:`Checkpoint` release: released weights, plus what a release usually carries.

A checkpoint is saved as a directory with ``weights.safetensors`` (final and, optionally,
initial tensors) and ``release.json`` (architecture, optimizer and training metadata). Loading
never unpickles arbitrary objects: pickles are refused, and torch files go through
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from trainleak.errors import ConfigError
from trainleak.models.spec import (
    ModelSpec,
    StateDict,
    metadata_of,
    read_release_dir,
    refuse_pickle,
    spec_from_json,
)
from trainleak.releases.base import Release


@dataclass(frozen=True)
class OptimizerSpec:
    """Which optimizer produced the weights (drives optimizer-aware attacks).

    Attributes:
        name: ``"gd"``, ``"sgd"``, ``"adam"``, ``"muon"`` or ``"signum"``.
        lr: learning rate.
        params: other hyper-parameters (momentum, betas, eps, weight_decay, ...).
    """

    name: str
    lr: float
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainingSpec:
    """How the model was trained: loss, steps, data size and final statistics."""

    loss: str
    steps: int
    n_train: int
    batch_size: int | None = None
    final_loss: float | None = None
    min_margin: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Checkpoint(Release):
    """Released model weights.

    Attributes:
        architecture: the model's :class:`ModelSpec`.
        final: the released (trained) state dict.
        initial: the initial state dict, when it is released too (seed 12).
        optimizer: the optimizer metadata, when known.
        training: training metadata, when known.
    """

    architecture: ModelSpec
    final: StateDict
    initial: StateDict | None = None
    optimizer: OptimizerSpec | None = None
    training: TrainingSpec | None = None

    def describe(self) -> str:
        n = sum(t.numel() for t in self.final.values())
        opt = self.optimizer.name if self.optimizer else "unknown optimizer"
        return f"Checkpoint({self.architecture.kind}, {n} parameters, {opt})"

    def save(self, directory: str | Path) -> Path:
        """Write ``weights.safetensors`` and ``release.json`` into ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {f"final.{k}": v.detach().contiguous().cpu() for k, v in self.final.items()}
        if self.initial is not None:
            tensors.update(
                {f"initial.{k}": v.detach().contiguous().cpu() for k, v in self.initial.items()}
            )
        save_file(tensors, str(out / "weights.safetensors"))
        meta = {
            "format": "trainleak.checkpoint/1",
            "architecture": asdict(self.architecture),
            "optimizer": asdict(self.optimizer) if self.optimizer else None,
            "training": asdict(self.training) if self.training else None,
        }
        (out / "release.json").write_text(json.dumps(meta, indent=2))
        return out

    @classmethod
    def load(cls, path: str | Path) -> Checkpoint:
        """Load a checkpoint directory written by :meth:`save`.

        Raises:
            DataNotFoundError: the directory or one of its files is missing
                (``CorruptDataError``: a file is not readable JSON or safetensors).
            ConfigError: the metadata is malformed (the message names the file).
            UnsafeFileError: the path is a pickle, or a torch file that needs unpickling.
        """
        p = Path(path)
        if p.is_file():
            refuse_pickle(p)
            raise ConfigError.invalid(
                "path", "a checkpoint directory with weights.safetensors and release.json", str(p)
            )
        tensors, meta = read_release_dir(p, "weights.safetensors", "release.json", "checkpoint")
        final = {k[len("final.") :]: v for k, v in tensors.items() if k.startswith("final.")}
        initial = {k[len("initial.") :]: v for k, v in tensors.items() if k.startswith("initial.")}
        with metadata_of(p / "release.json"):
            opt, train = meta.get("optimizer"), meta.get("training")
            return cls(
                architecture=spec_from_json(meta.get("architecture"), "architecture"),
                final=final,
                initial=initial or None,
                optimizer=OptimizerSpec(**opt) if opt else None,
                training=TrainingSpec(**train) if train else None,
            )
