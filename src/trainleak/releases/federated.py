"""The :class:`GradientUpdate` release: what a federated client sends to the server.

In FedSGD a client sends the gradient of its mean loss over one batch; in FedAvg it takes
several local steps and sends the change of its weights. Either way the server also knows the
model state it broadcast, so the release carries both. Updates exported from another framework
(Flower, a hand-written loop) are read from safetensors or a weights-only torch file with
:meth:`GradientUpdate.from_files`; pickles are refused.

References:
    McMahan, Moore, Ramage, Hampson, Aguera y Arcas, *Communication-Efficient Learning of Deep
    Networks from Decentralized Data*, AISTATS 2017 (FedSGD and FedAvg).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
from safetensors.torch import save_file

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.registry import build_model
from trainleak.models.spec import (
    ModelSpec,
    StateDict,
    load_state_dict,
    metadata_of,
    read_release_dir,
    spec_from_json,
)
from trainleak.releases.base import Release
from trainleak.validation import check_fields, param

UpdateKind = Literal["gradient", "delta"]


@dataclass(frozen=True)
class GradientUpdate(Release):
    """One client's update and the model state it was computed at.

    Attributes:
        architecture: the model's :class:`~trainleak.releases.ModelSpec`.
        parameters: the broadcast state dict the client started from.
        update: for ``kind="gradient"`` (FedSGD) the gradient of the mean cross-entropy over
            the batch; for ``kind="delta"`` (FedAvg) the weight change ``start - end``.
        batch_size: number of samples behind the update, when the server is told.
        local_steps: local optimisation steps (1 for FedSGD).
        learning_rate: the local learning rate (required when ``local_steps > 1``).
        kind: ``"gradient"`` or ``"delta"``.

    Raises:
        ShapeError: an update entry has no parameter of the same name and shape, or the
            parameters do not fit the architecture.
        ConfigError: NaN or infinite entries, or inconsistent counts and rates.

    Example:
        >>> import torch
        >>> from trainleak.models import model_spec
        >>> spec = model_spec("mlp", input_shape=(2,), hidden=[], out_dim=2)
        >>> p = {"layers.0.weight": torch.zeros(2, 2), "layers.0.bias": torch.zeros(2)}
        >>> GradientUpdate(spec, p, {k: v + 1 for k, v in p.items()}, batch_size=4).n_values
        6
    """

    architecture: ModelSpec
    parameters: StateDict
    update: StateDict
    batch_size: int | None = param(None, ge=1, integer=True)
    local_steps: int = param(1, ge=1, integer=True)
    learning_rate: float | None = param(None, gt=0, lt=math.inf)
    kind: UpdateKind = param("gradient", choices=UpdateKind)

    def __post_init__(self) -> None:
        check_fields(self)
        _check_counts(self)
        _check_update(self.parameters, self.update)
        _check_against_architecture(self.architecture, self.parameters)

    @property
    def n_values(self) -> int:
        """Number of scalars in the update."""
        return sum(int(v.numel()) for v in self.update.values())

    @property
    def dtype(self) -> torch.dtype:
        """Floating dtype of the update (float64 for the exact path)."""
        return next(iter(self.update.values())).dtype

    def describe(self) -> str:
        b = "unknown B" if self.batch_size is None else f"B={self.batch_size}"
        return (
            f"GradientUpdate({self.architecture.kind}, {self.n_values} values, {b}, "
            f"{self.local_steps} local step(s), {self.kind})"
        )

    def save(self, directory: str | Path) -> Path:
        """Write ``update.safetensors`` and ``release.json`` into ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {f"parameters.{k}": v.detach().contiguous() for k, v in self.parameters.items()}
        tensors.update({f"update.{k}": v.detach().contiguous() for k, v in self.update.items()})
        save_file(tensors, str(out / "update.safetensors"))
        meta = {
            "format": "trainleak.gradient_update/1",
            "architecture": asdict(self.architecture),
            "batch_size": self.batch_size,
            "local_steps": self.local_steps,
            "learning_rate": self.learning_rate,
            "kind": self.kind,
        }
        (out / "release.json").write_text(json.dumps(meta, indent=2))
        return out

    @classmethod
    def load(cls, directory: str | Path) -> GradientUpdate:
        """Read a directory written by :meth:`save` (safetensors only, never a pickle).

        Raises:
            DataNotFoundError: a file is missing (``CorruptDataError``: not readable JSON or
                safetensors).
            ConfigError, ShapeError: the metadata or tensors do not make a valid update (the
                message names the file).
        """
        d = Path(directory)
        tensors, meta = read_release_dir(d, "update.safetensors", "release.json", "gradient-update")
        params = {k[11:]: v for k, v in tensors.items() if k.startswith("parameters.")}
        update = {k[7:]: v for k, v in tensors.items() if k.startswith("update.")}
        with metadata_of(d / "release.json"):
            return cls(
                architecture=spec_from_json(meta.get("architecture"), "architecture"),
                parameters=params,
                update=update,
                batch_size=meta.get("batch_size"),
                local_steps=meta.get("local_steps", 1),
                learning_rate=meta.get("learning_rate"),
                kind=meta.get("kind", "gradient"),
            )

    @classmethod
    def from_files(
        cls,
        architecture: ModelSpec,
        parameters: str | Path,
        update: str | Path,
        *,
        batch_size: int | None = None,
        local_steps: int = 1,
        learning_rate: float | None = None,
        kind: UpdateKind = "gradient",
    ) -> GradientUpdate:
        """Build a release from an update exported elsewhere (e.g. a Flower client).

        Both files hold flat state dicts of tensors: safetensors, or torch files read with
        ``weights_only=True``. Pickles are refused with
        :class:`~trainleak.errors.UnsafeFileError`. Names must match the architecture's.

        Args:
            architecture: the model the update belongs to.
            parameters: file with the broadcast weights.
            update: file with the gradients (or weight change, for ``kind="delta"``).
            batch_size: the client's batch size, when known.
            local_steps: local steps behind the update.
            learning_rate: the local learning rate.
            kind: ``"gradient"`` or ``"delta"``.

        Returns:
            The validated :class:`GradientUpdate`.
        """
        return cls(
            architecture=architecture,
            parameters=load_state_dict(parameters),
            update=load_state_dict(update),
            batch_size=batch_size,
            local_steps=local_steps,
            learning_rate=learning_rate,
            kind=kind,
        )


def _check_counts(u: GradientUpdate) -> None:
    if u.local_steps > 1 and u.learning_rate is None:
        raise ConfigError.invalid(
            "learning_rate", "the local learning rate when local_steps > 1", None
        )


def _check_update(parameters: StateDict, update: StateDict) -> None:
    if not update:
        raise ConfigError.invalid("update", "a non-empty state dict of tensors", update)
    for name, g in update.items():
        if name not in parameters:
            raise ShapeError(
                f"update entry {name!r} has no parameter of that name; "
                f"parameters are {sorted(parameters)[:8]}"
            )
        if tuple(g.shape) != tuple(parameters[name].shape):
            raise ShapeError(
                f"update[{name!r}] has shape {tuple(g.shape)}, expected "
                f"{tuple(parameters[name].shape)} (the parameter's shape)"
            )
        if not g.is_floating_point():
            raise ConfigError.invalid(f"update[{name!r}].dtype", "a floating dtype", g.dtype)
        bad = int((~torch.isfinite(g)).sum())
        if bad:
            n_nan = int(torch.isnan(g).sum())
            raise ConfigError.invalid(
                f"update[{name!r}]", "finite values", f"{n_nan} NaN and {bad - n_nan} infinite"
            )
    missing = sorted(set(parameters) - set(update))
    if missing:
        raise ShapeError(f"update lacks entries for parameters {missing[:8]}")


def _check_against_architecture(spec: ModelSpec, parameters: StateDict) -> None:
    with torch.device("meta"):
        model = build_model(spec, seed=0)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    for name, shape in expected.items():
        if name not in parameters:
            raise ShapeError(f"parameters lack {name!r} that architecture {spec.kind!r} needs")
        if tuple(parameters[name].shape) != shape:
            raise ShapeError(
                f"parameters[{name!r}] has shape {tuple(parameters[name].shape)}, but "
                f"architecture {spec.kind!r} expects {shape}"
            )
    extra = sorted(set(parameters) - set(expected))
    if extra:
        raise ShapeError(f"parameters {extra[:8]} are not in architecture {spec.kind!r}")


@dataclass(frozen=True)
class ImprintLayout:
    """Where the bins are: the first layer's neurons, grouped and sorted by threshold.

    Attributes:
        groups: one index tensor per group, neurons sorted by increasing threshold (so row k
            minus row k+1 is bin k). Neurons in no group form groups of one.
        thresholds: per group, the sorted thresholds ``t_k``.
    """

    groups: tuple[torch.Tensor, ...]
    thresholds: tuple[torch.Tensor, ...]

    @property
    def n_imprint_groups(self) -> int:
        """Groups of two or more neurons (the imprint part)."""
        return sum(1 for g in self.groups if g.numel() > 1)

    def difference_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Index pairs ``(row, next)``: transformed row ``r`` is ``G[row[r]] - G[next[r]]``.

        ``next`` is -1 for the last bin of a group (nothing to subtract).
        """
        rows, nxt = [], []
        for g in self.groups:
            rows.append(g)
            nxt.append(torch.cat([g[1:], torch.tensor([-1], dtype=torch.long)]))
        return torch.cat(rows), torch.cat(nxt)
