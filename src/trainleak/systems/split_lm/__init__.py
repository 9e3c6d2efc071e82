"""Split fine-tuning of causal language models (client bottom and top, server trunk) with the
server's transcript recorded, and the references: non-split, and the client alone."""

from trainleak.systems.split_lm.calibrate import aux_pool, fit_calibrator, probe_residual
from trainleak.systems.split_lm.reference import train_reference
from trainleak.systems.split_lm.train import (
    SplitRun,
    SplitTrainingConfig,
    SplitTruth,
    accuracy,
    train_split,
)

__all__ = [
    "SplitRun",
    "SplitTrainingConfig",
    "SplitTruth",
    "accuracy",
    "aux_pool",
    "fit_calibrator",
    "probe_residual",
    "train_reference",
    "train_split",
]
