"""Dataset distillation, the simulator of the distilled-data release: gradient matching (DC,
DSA), distribution matching (DM) and trajectory matching (MTT), plus the evaluation protocol
that checks a distilled set against random real subsets of the same size."""

from trainleak.systems.distillation.common import DistillationRun, DistillConfig, Init
from trainleak.systems.distillation.dc import DCConfig
from trainleak.systems.distillation.dm import DMConfig
from trainleak.systems.distillation.evaluate import (
    EvalProtocol,
    Evaluation,
    evaluate_random_subsets,
    evaluate_set,
    random_subset_accuracies,
    random_subset_accuracy,
    set_accuracies,
    set_accuracy,
    train_on,
)
from trainleak.systems.distillation.mtt import MTTConfig
from trainleak.systems.distillation.run import ALGORITHMS, distill

__all__ = [
    "ALGORITHMS",
    "DCConfig",
    "DMConfig",
    "DistillConfig",
    "DistillationRun",
    "EvalProtocol",
    "Evaluation",
    "Init",
    "MTTConfig",
    "distill",
    "evaluate_random_subsets",
    "evaluate_set",
    "random_subset_accuracies",
    "random_subset_accuracy",
    "set_accuracies",
    "set_accuracy",
    "train_on",
]
