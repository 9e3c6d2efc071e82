"""Data Collaboration analysis as a system: participants share dimension-reduced data and an
anchor's representation (the release); the analyst's public alignment of that release is in
:mod:`trainleak.releases.collaboration_alignment`."""

from trainleak.systems.collaboration.parties import DCParty, collaborate

__all__ = ["DCParty", "collaborate"]
