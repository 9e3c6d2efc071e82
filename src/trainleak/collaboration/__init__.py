"""Data Collaboration analysis: participants, the analyst's alignment, and its metrics."""

from trainleak.collaboration.analyst import Alignment, align
from trainleak.collaboration.linalg import haar_orthogonal, polar, procrustes_affine
from trainleak.collaboration.metrics import downstream_accuracy, linkage_rate, relative_error
from trainleak.collaboration.parties import DCParty, collaborate

__all__ = [
    "Alignment",
    "DCParty",
    "align",
    "collaborate",
    "downstream_accuracy",
    "haar_orthogonal",
    "linkage_rate",
    "polar",
    "procrustes_affine",
    "relative_error",
]
