"""Release types (what an adversary observes) and Knowledge (what it knows besides)."""

from trainleak.releases.base import Knowledge, Release
from trainleak.releases.checkpoint import (
    Checkpoint,
    ModelSpec,
    OptimizerSpec,
    StateDict,
    TrainingSpec,
    load_state_dict,
)

__all__ = [
    "Checkpoint",
    "Knowledge",
    "ModelSpec",
    "OptimizerSpec",
    "Release",
    "StateDict",
    "TrainingSpec",
    "load_state_dict",
]
