"""Release-time defenses (composable) and the protocol they follow."""

from trainleak.defenses.base import Chain, Defense, chain

__all__ = ["Chain", "Defense", "chain"]
