"""Training loops (GD, SGD, Adam, Muon, Signum) that release a Checkpoint."""

from trainleak.systems.training.config import TrainConfig
from trainleak.systems.training.loop import History, loss_fn, margins, train, train_checkpoint
from trainleak.systems.training.optimizers import Signum, make_optimizers

__all__ = [
    "History",
    "Signum",
    "TrainConfig",
    "loss_fn",
    "make_optimizers",
    "margins",
    "train",
    "train_checkpoint",
]
