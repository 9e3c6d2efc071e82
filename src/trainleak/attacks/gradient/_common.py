"""Helpers shared by the gradient attacks: the model behind a release, shapes, fixtures."""

from __future__ import annotations

import math

import torch
from torch import nn

from trainleak.attacks.base import Attack
from trainleak.errors import ConfigError
from trainleak.models.functional import instantiate
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge


def release_model(release: GradientUpdate) -> nn.Module:
    """The model at the release's broadcast state, in the update's dtype."""
    params = {k: v.to(release.dtype) for k, v in release.parameters.items()}
    return instantiate(release.architecture, params)


def input_shape(release: GradientUpdate, knowledge: Knowledge) -> tuple[int, ...]:
    """The input shape: from the knowledge, else from the architecture's keywords."""
    if knowledge.input_shape is not None:
        return tuple(int(s) for s in knowledge.input_shape)
    shape = release.architecture.kwargs.get("input_shape")
    if shape is None:
        raise ConfigError.invalid("knowledge.input_shape", "the shape of one input", None)
    return tuple(int(s) for s in shape)


def require_fedsgd(release: GradientUpdate, who: str) -> None:
    """Refuse FedAvg deltas for attacks that read a single FedSGD gradient."""
    if release.kind != "gradient" or release.local_steps != 1:
        raise ConfigError.invalid(
            "release.kind",
            f"a FedSGD gradient (kind='gradient', local_steps=1) for {who}",
            f"kind={release.kind!r}, local_steps={release.local_steps}",
        )


def check_flat_dim(release: GradientUpdate, shape: tuple[int, ...]) -> None:
    """Refuse an input shape that does not match the first layer's width."""
    w = release.parameters.get("layers.0.weight")
    if w is not None and w.ndim == 2 and int(w.shape[1]) != math.prod(shape):
        raise ConfigError.invalid(
            "knowledge.input_shape", f"a shape with {int(w.shape[1])} values", shape
        )


def tiny_batch(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random inputs in [0, 1]^d and labels in 0..2 (fixtures and doc examples)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=gen, dtype=torch.float64)
    return x, torch.randint(0, 3, (n,), generator=gen)


class FedSGDAttack(Attack[GradientUpdate]):
    """Base of the attacks that read one FedSGD gradient update.

    The reconstructed inputs have the shape the knowledge gives, else the architecture's.
    """

    def expected_shape(self, release: GradientUpdate, knowledge: Knowledge) -> tuple[int, ...]:
        return input_shape(release, knowledge)
