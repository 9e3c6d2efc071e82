"""Feature maps for feature-space distortion bounds.

:class:`LPIPSFormulaMap` applies the LPIPS formula (unit-normalised, channel-weighted feature
maps, averaged over locations) to any backbone, so that the LPIPS distance becomes a squared
Euclidean distance ||psi(x) - psi(y)||^2. :func:`load_lpips_alexnet` builds the real LPIPS
(AlexNet) from files the user supplies; :func:`train_feature_net` trains the project's own small
convolutional feature network, which is *not* LPIPS and is never called so.
"""

from trainleak.metrics.features.lpips_formula import LPIPSFormulaMap, load_lpips_alexnet
from trainleak.metrics.features.trained import train_feature_net

__all__ = ["LPIPSFormulaMap", "load_lpips_alexnet", "train_feature_net"]
