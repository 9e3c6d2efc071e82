"""Attacks on a released distilled data set: the information revelation attack (IRA) of Chen
et al. 2026: algorithm and architecture revelation, membership inference through a white-box
surrogate or the synthetic images, and recovery of training images."""

from trainleak.attacks.distillation.fingerprint import FingerprintSpec, fingerprint, fingerprints
from trainleak.attacks.distillation.membership import (
    LiRAMembership,
    LossMembership,
    NearestSyntheticMembership,
)
from trainleak.attacks.distillation.recovery import NearestSyntheticRecovery, restore_images
from trainleak.attacks.distillation.reveal import (
    InformationRevelation,
    MetaClassifier,
    Revelation,
    held_out_accuracy,
)

__all__ = [
    "FingerprintSpec",
    "InformationRevelation",
    "LiRAMembership",
    "LossMembership",
    "MetaClassifier",
    "NearestSyntheticMembership",
    "NearestSyntheticRecovery",
    "restore_images",
    "Revelation",
    "fingerprint",
    "fingerprints",
    "held_out_accuracy",
]
