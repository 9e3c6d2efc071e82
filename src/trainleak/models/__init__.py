"""Architectures built from serialisable specs (:class:`ModelSpec`), their weights, and
functional autograd over them (:mod:`trainleak.models.functional`)."""

from trainleak.models.convnet import ConvNet
from trainleak.models.convnet_bn import ConvNetBN
from trainleak.models.gaussian import GaussianMLP
from trainleak.models.lenet import LeNet
from trainleak.models.mlp import MLP, HomogeneousMLP
from trainleak.models.random_features import RandomFeatures
from trainleak.models.registry import available_models, build_model, model_spec, register_model
from trainleak.models.resnet import ResNet
from trainleak.models.spec import ModelSpec, StateDict, load_state_dict
from trainleak.models.split import SplitConvNet, SplitSpec, split_modules

__all__ = [
    "MLP",
    "ModelSpec",
    "StateDict",
    "load_state_dict",
    "ConvNet",
    "ConvNetBN",
    "GaussianMLP",
    "LeNet",
    "ResNet",
    "HomogeneousMLP",
    "RandomFeatures",
    "SplitConvNet",
    "SplitSpec",
    "split_modules",
    "available_models",
    "build_model",
    "model_spec",
    "register_model",
]
