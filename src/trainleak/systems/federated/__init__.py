"""Federated learning as a system that produces releases: clients, FedSGD/FedAvg updates, and a
malicious server's imprint layers (the model it sends to clients)."""

from trainleak.systems.federated.client import Client, fedavg_update, fedsgd_update
from trainleak.systems.federated.malicious import imprint_first_layer, malicious_mlp

__all__ = ["Client", "fedavg_update", "fedsgd_update", "imprint_first_layer", "malicious_mlp"]
