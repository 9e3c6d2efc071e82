"""Recovery scores for distilled sets: how close the released synthetic images come to the
private images, measured by SSIM to the closest synthetic image.

For every private image of interest (the images a real-initialised set started from, or all
members) the best SSIM over the candidates is its recovery score; the share of images whose
best SSIM reaches a threshold is the recovered share.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainleak.metrics.image import ssim_matrix


@dataclass(frozen=True)
class RecoveryScores:
    """Best SSIM of each private image against the candidates.

    Attributes:
        best_ssim: ``(n,)`` best SSIM of each private image.
        matched: ``(n,)`` index of the candidate that achieves it.
    """

    best_ssim: torch.Tensor
    matched: torch.Tensor

    def share_above(self, threshold: float) -> float:
        """Share of private images whose best SSIM is at least ``threshold``."""
        return float((self.best_ssim >= threshold).double().mean())

    @property
    def mean(self) -> float:
        """Mean best SSIM."""
        return float(self.best_ssim.double().mean())


def recovery_scores(
    private: torch.Tensor, candidates: torch.Tensor, data_range: float = 1.0
) -> RecoveryScores:
    """Best SSIM of each private image over ``candidates`` (both image batches)."""
    sim = ssim_matrix(private.double(), candidates.double(), data_range=data_range)
    best, idx = sim.max(dim=1)
    return RecoveryScores(best.float(), idx)
