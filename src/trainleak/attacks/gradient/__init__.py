"""Attacks on federated gradient updates (FedSGD / FedAvg)."""
