"""Architectures, built from serialisable specs."""

from trainleak.models.convnet import ConvNet
from trainleak.models.gaussian import GaussianMLP
from trainleak.models.mlp import MLP, HomogeneousMLP
from trainleak.models.random_features import RandomFeatures, random_features_checkpoint
from trainleak.models.registry import available_models, build_model, model_spec, register_model

__all__ = [
    "MLP",
    "ConvNet",
    "GaussianMLP",
    "HomogeneousMLP",
    "RandomFeatures",
    "available_models",
    "build_model",
    "model_spec",
    "random_features_checkpoint",
    "register_model",
]
