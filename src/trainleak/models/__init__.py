"""Architectures, built from serialisable specs."""

from trainleak.models.convnet import ConvNet
from trainleak.models.mlp import MLP, HomogeneousMLP
from trainleak.models.registry import available_models, build_model, model_spec, register_model

__all__ = [
    "MLP",
    "ConvNet",
    "HomogeneousMLP",
    "available_models",
    "build_model",
    "model_spec",
    "register_model",
]
