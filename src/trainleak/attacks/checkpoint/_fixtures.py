"""Tiny releases used by the conformance suite and doc examples (seconds to build)."""

from __future__ import annotations

import torch

from trainleak.models.registry import model_spec
from trainleak.releases.base import Knowledge
from trainleak.releases.checkpoint import Checkpoint
from trainleak.systems.training.config import TrainConfig
from trainleak.systems.training.loop import train_checkpoint


def tiny_binary_checkpoint(seed: int = 0) -> tuple[Checkpoint, Knowledge]:
    """A 16-16-1 homogeneous MLP trained on 8 random points in [-1, 1]^16 (binary labels)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(8, 1, 4, 4, generator=gen) * 2 - 1
    y = torch.arange(8) % 2
    spec = model_spec("homogeneous_mlp", input_shape=(1, 4, 4), hidden=[16], out_dim=1)
    ckpt, _ = train_checkpoint(spec, x, y, TrainConfig(lr=0.2, steps=200, log_every=100))
    return ckpt, Knowledge(input_shape=(1, 4, 4), value_range=(-1.0, 1.0), label_set=(0, 1))
