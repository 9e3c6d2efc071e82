"""Metrics that compare a reconstruction with the ground truth.

Image metrics (PSNR, SSIM), matching (NCC nearest neighbour, Hungarian, best SSIM), the
reconstruction evaluation of Haim et al., trivial baselines scored by the same code, and the
reconstruction grid shown in reports.
"""

from trainleak.metrics.baselines import (
    class_mean_candidates,
    compare_to_baselines,
    mean_image_candidates,
    random_candidates,
)
from trainleak.metrics.image import (
    SSIM_MIN_SIDE,
    as_image_batch,
    minmax_normalize,
    psnr,
    ssim,
    ssim_matrix,
)
from trainleak.metrics.image_grid import reconstruction_grid
from trainleak.metrics.matching import (
    MatchMethod,
    ReconstructionScores,
    count_key,
    evaluate_reconstruction,
    match_hungarian,
    match_nearest,
    ncc_matrix,
)

__all__ = [
    "SSIM_MIN_SIDE",
    "MatchMethod",
    "ReconstructionScores",
    "as_image_batch",
    "class_mean_candidates",
    "compare_to_baselines",
    "count_key",
    "evaluate_reconstruction",
    "mean_image_candidates",
    "match_hungarian",
    "match_nearest",
    "minmax_normalize",
    "ncc_matrix",
    "psnr",
    "random_candidates",
    "reconstruction_grid",
    "ssim",
    "ssim_matrix",
]
