"""Tiny FedSGD releases for the conformance suite and doc examples (milliseconds to build)."""

from __future__ import annotations

import torch

from trainleak.attacks.gradient._common import tiny_batch
from trainleak.models.registry import build_model, model_spec
from trainleak.releases.base import Knowledge
from trainleak.releases.federated import GradientUpdate
from trainleak.systems.federated.client import fedsgd_update
from trainleak.systems.federated.malicious import malicious_mlp


def tiny_malicious_update(seed: int = 0, batch: int = 6) -> tuple[GradientUpdate, Knowledge]:
    """A 12-dim batch sent through a 3-group x 8-bin imprint MLP (float64)."""
    public, _ = tiny_batch(200, 12, seed + 100)
    spec, params = malicious_mlp((12,), 3, public, n_groups=3, bins_per_group=8, hidden=8)
    x, y = tiny_batch(batch, 12, seed)
    upd = fedsgd_update(spec, params, x, y)
    return upd, Knowledge(input_shape=(12,), value_range=(0.0, 1.0), active=True)


def tiny_honest_update(seed: int = 0, batch: int = 4) -> tuple[GradientUpdate, Knowledge]:
    """A 12-dim batch through an honest 12-64-3 MLP at initialisation (float64)."""
    spec = model_spec("mlp", input_shape=(12,), hidden=[64], out_dim=3)
    params = {k: v.to(torch.float64) for k, v in build_model(spec, seed=seed).state_dict().items()}
    x, y = tiny_batch(batch, 12, seed)
    upd = fedsgd_update(spec, params, x, y)
    return upd, Knowledge(input_shape=(12,), value_range=(0.0, 1.0))
