"""Release types (what an adversary observes) and Knowledge (what it knows besides)."""

from trainleak.models.spec import ModelSpec, StateDict, load_state_dict
from trainleak.releases.base import Release
from trainleak.releases.checkpoint import Checkpoint, OptimizerSpec, TrainingSpec
from trainleak.releases.collaboration import Disclosure, SharedRepresentations, Upload
from trainleak.releases.dp import DPTrajectory, PrivateRegression
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.unlearning import BroadcastLog, DeletionTranscript, SummaryMessage

__all__ = [
    "BroadcastLog",
    "Checkpoint",
    "DPTrajectory",
    "DeletionTranscript",
    "Disclosure",
    "GradientUpdate",
    "Knowledge",
    "ModelSpec",
    "OptimizerSpec",
    "PrivateRegression",
    "Release",
    "SharedRepresentations",
    "StateDict",
    "SummaryMessage",
    "TrainingSpec",
    "Upload",
    "load_state_dict",
]
