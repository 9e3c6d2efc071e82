"""Prototype read-out: reconstruct the training set of a Gaussian-activation MLP from its weights.

In f(x) = sum_j v_j exp(-(w_j x + b_j)^2) + c each hidden unit peaks at p_j = -b_j / w_j. When
the width equals the data-set size and training makes units specialise, the set {p_j} is a
reconstruction of the training inputs (Alba and Lopez-Rubio 2026). The attack is a closed-form
read-out; what the study varies is the *training objective* that makes it more or less
accurate (see :mod:`trainleak.systems.training.prototypes` and the ``gaussian-prototypes``
experiment).

The module also holds the study's evaluation functions (they use the ground truth, so the
attack never calls them): the Hungarian-matched error, the specialisation ratio and the
fraction of prototypes expelled outside the data's convex hull.

References:
    Alba and Lopez-Rubio, "From Latent Space to Training Data: Explainable Specialization in
    Minimal MLPs", arXiv 2605.25939, 2026.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.errors import ConfigError, ShapeError
from trainleak.progress import Progress
from trainleak.releases.checkpoint import Checkpoint
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param

SUPPORTED = ("gaussian_mlp",)


@register_attack
@dataclass(frozen=True, kw_only=True)
class PrototypeReconstruction(Attack[Checkpoint]):
    """Read the prototypes p_j = -b_j / w_j of a released Gaussian-activation MLP.

    Each candidate's score is |v_j|, the magnitude of the unit's output weight (a unit the fit
    does not use carries little evidence of a training point) [inferred].

    Args:
        max_candidates: keep at most this many prototypes, highest score first (``None``:
            all; with ``Knowledge.n_records`` known, an attacker would set it to that).
        min_abs_slope: drop units with |w_j| below this; their response is nearly flat and
            their peak position is ill-defined.
        clip_to_range: clip prototypes into ``Knowledge.value_range`` (needs it set).

    Example:
        >>> attack = PrototypeReconstruction(max_candidates=5)
        >>> attack.max_candidates
        5
    """

    name: ClassVar[str] = "prototypes"
    summary: ClassVar[str] = (
        "Closed-form read-out of the hidden-unit prototypes -b/w of a one-hidden-layer "
        "Gaussian-activation MLP (Alba and Lopez-Rubio 2026)"
    )
    release_type: ClassVar[type[Checkpoint]] = Checkpoint
    requires: ClassVar[frozenset[str]] = frozenset({"input_shape"})

    max_candidates: int | None = param(None, ge=1, integer=True)
    min_abs_slope: float = param(1e-6, ge=0)
    clip_to_range: bool = False

    def run(
        self,
        release: Checkpoint,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        w, b, v = _read_units(release)
        if tuple(knowledge.input_shape or ()) != (1,):
            raise ShapeError(
                f"the Gaussian MLP takes scalar inputs: Knowledge.input_shape must be (1,), "
                f"received {knowledge.input_shape}"
            )
        keep = w.abs() >= self.min_abs_slope
        protos, scores = (-b / w)[keep], v.abs()[keep]
        order = torch.argsort(scores, descending=True, stable=True)
        if self.max_candidates is not None:
            order = order[: self.max_candidates]
        protos, scores = protos[order], scores[order]
        if self.clip_to_range:
            if knowledge.value_range is None:
                raise ConfigError.invalid(
                    "clip_to_range", "False unless Knowledge.value_range is set", True
                )
            protos = protos.clamp(*knowledge.value_range)
        return Reconstruction(
            inputs=protos.reshape(-1, 1),
            scores=scores,
            diagnostics={"n_units": int(w.numel()), "n_dropped_flat": int((~keep).sum())},
        )


def _read_units(release: Checkpoint) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Slopes, offsets and output weights of a single-replica Gaussian MLP checkpoint."""
    kind = release.architecture.kind
    if kind not in SUPPORTED:
        raise ConfigError(
            f"prototype reconstruction supports one-hidden-layer Gaussian-activation MLPs "
            f"(architecture kinds {list(SUPPORTED)}); the checkpoint is {kind!r}"
        )
    state = release.final
    missing = [k for k in ("w", "b", "v") if k not in state]
    if missing:
        raise ConfigError(f"the gaussian_mlp checkpoint lacks the tensors {missing}")
    w, b, v = (state[k].detach().double() for k in ("w", "b", "v"))
    if w.ndim != 2 or w.shape[0] != 1:
        raise ShapeError(
            f"expected a single network (n_models=1), the checkpoint holds weights of shape "
            f"{tuple(w.shape)}; release one replica (GaussianMLP.replica_state)"
        )
    return w[0], b[0], v[0]
