"""Build models from a serialisable :class:`~trainleak.releases.ModelSpec`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.bottleneck import MIDMLP, MaskedMLP
from trainleak.models.convnet import ConvNet
from trainleak.models.generative import VAE, ConvVAEDecoder, Discriminator, VAEDecoder
from trainleak.models.memory import check_fits, parameter_count
from trainleak.models.mlp import MLP, HomogeneousMLP
from trainleak.models.spec import ModelSpec, StateDict

_BUILDERS: dict[str, Callable[..., nn.Module]] = {
    "mlp": MLP,
    "homogeneous_mlp": HomogeneousMLP,
    "convnet": ConvNet,
    # model inversion (issue 12)
    "mid_mlp": MIDMLP,
    "masked_mlp": MaskedMLP,
    "vae": VAE,
    "vae_decoder": VAEDecoder,
    "vae_conv_decoder": ConvVAEDecoder,
    "gan_critic": Discriminator,
}


def register_model(kind: str, builder: Callable[..., nn.Module]) -> None:
    """Make ``builder(**kwargs)`` available to :func:`build_model` as ``kind``."""
    _BUILDERS[kind] = builder


def available_models() -> list[str]:
    """Names accepted as ``ModelSpec.kind``."""
    return sorted(_BUILDERS)


def build_model(
    spec: ModelSpec, *, seed: int | None = None, state: StateDict | None = None
) -> nn.Module:
    """Instantiate ``spec``; initialise from ``seed`` (locally) or load ``state``.

    Args:
        spec: the architecture.
        seed: seed of the initialisation; the global RNG state is restored afterwards.
        state: a state dict to load instead of a fresh initialisation.

    Raises:
        ConfigError: unknown kind, keywords the architecture does not take, or a model too
            large for the memory available (checked before any weight is allocated).
    """
    if spec.kind not in _BUILDERS:
        raise ConfigError.invalid("architecture.kind", f"one of {available_models()}", spec.kind)
    try:
        count = parameter_count(_BUILDERS[spec.kind], dict(spec.kwargs))
    except TypeError as exc:
        raise ConfigError(f"architecture {spec.kind!r}: {exc}") from None
    check_fits(spec.kind, dict(spec.kwargs), count)
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        try:
            model = _BUILDERS[spec.kind](**spec.kwargs)
        except TypeError as exc:
            raise ConfigError(f"architecture {spec.kind!r}: {exc}") from None
    if state is not None:
        model.load_state_dict(state)
    return model


def model_spec(kind: str, **kwargs: Any) -> ModelSpec:
    """Shorthand for ``ModelSpec(kind, kwargs)`` with tuples made JSON-friendly lists."""
    clean = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
    return ModelSpec(kind=kind, kwargs=clean)
