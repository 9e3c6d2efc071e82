"""Metrics that compare a reconstruction with the ground truth.

Image metrics (PSNR, SSIM), matching (NCC nearest neighbour, Hungarian, best SSIM), the
reconstruction evaluation of Haim et al., trivial baselines scored by the same code, and the
reconstruction grid shown in reports.
"""

from trainleak.metrics.baselines import (
    check_equal_budget,
    class_mean_candidates,
    compare_to_baselines,
    heldout_candidates,
    mean_image_candidates,
    perturbed_mean_candidates,
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
from trainleak.metrics.specificity import SpecificityScores, specificity, standardise

__all__ = [
    "SSIM_MIN_SIDE",
    "MatchMethod",
    "ReconstructionScores",
    "SpecificityScores",
    "as_image_batch",
    "check_equal_budget",
    "class_mean_candidates",
    "compare_to_baselines",
    "count_key",
    "evaluate_reconstruction",
    "heldout_candidates",
    "mean_image_candidates",
    "match_hungarian",
    "match_nearest",
    "minmax_normalize",
    "ncc_matrix",
    "psnr",
    "perturbed_mean_candidates",
    "random_candidates",
    "reconstruction_grid",
    "ssim",
    "specificity",
    "ssim_matrix",
    "standardise",
]
