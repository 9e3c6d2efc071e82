"""The released-classifier simulator (model inversion, seeds 3 and 8): train a classifier on
the private classes with a training-time defense, and train the adversary's generative prior
on the public classes."""

from trainleak.systems.classifier.defenses import (
    ATAT,
    MID,
    AdversarialTraining,
    BiDO,
    Defense,
    MixUp,
    NegativeLabelSmoothing,
    Standard,
    TransferFreeze,
)
from trainleak.systems.classifier.prior import PriorSettings, train_prior
from trainleak.systems.classifier.training import (
    TrainedClassifier,
    TrainSettings,
    train_classifier,
)

__all__ = [
    "ATAT",
    "MID",
    "AdversarialTraining",
    "BiDO",
    "Defense",
    "MixUp",
    "NegativeLabelSmoothing",
    "PriorSettings",
    "Standard",
    "TrainSettings",
    "TrainedClassifier",
    "TransferFreeze",
    "train_classifier",
    "train_prior",
]
