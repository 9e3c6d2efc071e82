"""Informed-adversary attacks on DP releases: DP-SGD trajectories and private regression."""

from trainleak.attacks.informed.ridge import InformedRidgeAttack
from trainleak.attacks.informed.trajectory import (
    MAPTrajectoryAttack,
    PopulationMeanBaseline,
    PosteriorMeanAttack,
)

__all__ = [
    "InformedRidgeAttack",
    "MAPTrajectoryAttack",
    "PopulationMeanBaseline",
    "PosteriorMeanAttack",
]
