"""Penultimate-layer features of the registered classifiers (used by distribution matching and
by attacks that compare embeddings)."""

from __future__ import annotations

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.convnet import ConvNet
from trainleak.models.mlp import MLP, HomogeneousMLP


def embed(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The features the model's last linear layer reads, ``(n, k)``.

    Models with an ``embed`` method use it; MLPs give their last hidden activation and the
    ConvNet its flattened convolutional features.

    Raises:
        ConfigError: for a model without a known penultimate layer.
    """
    own = getattr(model, "embed", None)
    if callable(own):
        out = own(x)
        if not isinstance(out, torch.Tensor):
            raise ConfigError.invalid("model.embed", "a method returning a tensor", type(out))
        return out
    if isinstance(model, MLP | HomogeneousMLP):
        h = x.flatten(1)
        for layer in model.layers[:-1]:
            h = torch.relu(layer(h))
        return h
    if isinstance(model, ConvNet):
        return model.features(x).flatten(1)
    raise ConfigError.invalid("model", "an MLP, ConvNet or a model with embed()", type(model))
