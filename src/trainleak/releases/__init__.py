"""Release types (what an adversary observes) and Knowledge (what it knows besides), and the
validated readers of a user's own release and knowledge files (:mod:`.io`,
:mod:`.knowledge_file`)."""

from trainleak.models.spec import ModelSpec, StateDict, load_state_dict
from trainleak.releases.base import Release
from trainleak.releases.checkpoint import Checkpoint, OptimizerSpec, TrainingSpec
from trainleak.releases.collaboration import Disclosure, SharedRepresentations, Upload
from trainleak.releases.dp import DPTrajectory, PrivateRegression
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.io import DPSGDSpec, LoadedRelease, load_release
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.knowledge_file import load_knowledge
from trainleak.releases.unlearning import BroadcastLog, DeletionTranscript, SummaryMessage

__all__ = [
    "BroadcastLog",
    "Checkpoint",
    "DPSGDSpec",
    "DPTrajectory",
    "DeletionTranscript",
    "Disclosure",
    "GradientUpdate",
    "Knowledge",
    "LoadedRelease",
    "ModelSpec",
    "OptimizerSpec",
    "PrivateRegression",
    "Release",
    "SharedRepresentations",
    "StateDict",
    "SummaryMessage",
    "TrainingSpec",
    "Upload",
    "load_knowledge",
    "load_release",
    "load_state_dict",
]
