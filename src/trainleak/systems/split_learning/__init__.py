"""Split learning simulators: U-shaped federated split learning (clients hold head and tail,
the server the body), with the KD-UFSL defense as an option; the release is the server's
transcript."""

from trainleak.systems.split_learning.ufsl import (
    UFSLConfig,
    UFSLRun,
    split_accuracy,
    train_ufsl,
)

__all__ = ["UFSLConfig", "UFSLRun", "split_accuracy", "train_ufsl"]
