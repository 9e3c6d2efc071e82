"""The system side of unlearning: an exact ridge-head server, probes, deletion mechanisms."""

from trainleak.unlearning.features import frozen_features
from trainleak.unlearning.identify import (
    DeletedSummary,
    RecoveredDeletion,
    StateEstimate,
    identifiability,
    identify_state,
    recover_deletion,
    recover_summary,
)
from trainleak.unlearning.mechanisms import (
    DPLogisticRegression,
    ExactSum,
    RandomizedResponse,
    UnlearningMechanism,
)
from trainleak.unlearning.probes import (
    ProbingClient,
    detectability,
    identify_before,
    minimal_probe_count,
    plan_own_batches,
    plan_unrestricted,
)
from trainleak.unlearning.server import (
    ExactUnlearningServer,
    IllConditionedWarning,
    SingularStatisticsError,
    quantize,
)

__all__ = [
    "DPLogisticRegression",
    "DeletedSummary",
    "ExactSum",
    "ExactUnlearningServer",
    "IllConditionedWarning",
    "ProbingClient",
    "RandomizedResponse",
    "RecoveredDeletion",
    "SingularStatisticsError",
    "StateEstimate",
    "UnlearningMechanism",
    "detectability",
    "frozen_features",
    "identifiability",
    "identify_before",
    "identify_state",
    "minimal_probe_count",
    "plan_own_batches",
    "plan_unrestricted",
    "quantize",
    "recover_deletion",
    "recover_summary",
]
