"""Federated-learning simulation: clients, servers, imprint layers, per-sample gradients."""

from trainleak.federated.client import Client, fedavg_update, fedsgd_update
from trainleak.federated.functional import (
    FirstLayerSplit,
    batch_gradient,
    instantiate,
    per_sample_gradients,
    sum_gradient,
)
from trainleak.federated.imprint import (
    ImprintLayout,
    detect_layout,
    imprint_first_layer,
    malicious_mlp,
)

__all__ = [
    "Client",
    "FirstLayerSplit",
    "ImprintLayout",
    "batch_gradient",
    "detect_layout",
    "fedavg_update",
    "fedsgd_update",
    "imprint_first_layer",
    "instantiate",
    "malicious_mlp",
    "per_sample_gradients",
    "sum_gradient",
]
