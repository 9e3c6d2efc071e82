"""Data Collaboration analysis as a system: participants share dimension-reduced data and an
anchor's representation; the analyst aligns them."""

from trainleak.systems.collaboration.analyst import Alignment, align
from trainleak.systems.collaboration.parties import DCParty, collaborate

__all__ = ["Alignment", "DCParty", "align", "collaborate"]
