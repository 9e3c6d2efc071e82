"""Model inversion of a released white-box classifier (seeds 3 and 8): the standard
generative-prior attack, the adaptive attack and the prior-only baseline."""

from trainleak.attacks.inversion.generative import (
    AdaptiveInversion,
    GenerativeInversion,
    PriorOnly,
)

__all__ = ["AdaptiveInversion", "GenerativeInversion", "PriorOnly"]
