"""Attacks on a split language model's server transcript (seed 10's threat model): a learned
inverter, its defense-adaptive form, and BiSR-style forward-activation refinement."""

from trainleak.attacks.split_lm.bisr import BiSRRefinement
from trainleak.attacks.split_lm.inverter import AdaptiveInverter, LearnedInverter

__all__ = ["AdaptiveInverter", "BiSRRefinement", "LearnedInverter"]
