"""Attacks on a split-learning transcript (seed 15): an inverse network through the known
aggregated head, a FORA-style substitute head when the head is unknown, and white-box
optimisation through the head; each with a defense-adaptive switch."""

from trainleak.attacks.split_learning.inverse import InverseNetworkAttack, SubstituteHeadAttack
from trainleak.attacks.split_learning.whitebox import WhiteBoxHeadInversion

__all__ = ["InverseNetworkAttack", "SubstituteHeadAttack", "WhiteBoxHeadInversion"]
