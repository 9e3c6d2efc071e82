"""Unlearning as a system that produces releases: an exact ridge-head server with deletions,
and mechanisms re-run after each deletion (perfect retraining)."""

from trainleak.systems.unlearning.feature_maps import frozen_features
from trainleak.systems.unlearning.retraining import (
    DPLogisticRegression,
    ExactSum,
    RandomizedResponse,
    UnlearningMechanism,
)
from trainleak.systems.unlearning.server import (
    ExactUnlearningServer,
    IllConditionedWarning,
    SingularStatisticsError,
    quantize_head,
)

__all__ = [
    "DPLogisticRegression",
    "ExactSum",
    "ExactUnlearningServer",
    "IllConditionedWarning",
    "RandomizedResponse",
    "SingularStatisticsError",
    "UnlearningMechanism",
    "frozen_features",
    "quantize_head",
]
