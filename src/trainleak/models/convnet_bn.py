"""The eight-convolution BatchNorm ConvNet of the gradient-inversion literature.

Inverting Gradients (Geiping et al., NeurIPS 2020) and the breaching library evaluate on a
"ConvNet" of eight 3x3 convolutions of widths ``w, 2w, 2w, 4w, 4w, 4w | 4w, 4w``, each followed
by BatchNorm and ReLU, with a 3x3 max-pool after the sixth and after the eighth convolution and a
linear head on the ``4w x 3 x 3`` features. At ``w = 16`` on 3-channel 32x32 images it has
187,114 parameters (186,826 on 1-channel 28x28 images), the anchor's "about 187k".

BatchNorm here has no buffers, so the network stays a pure function of its parameters (a
release carries parameters only), and its mode is part of the architecture:

* ``bn_mode="train"``: batch statistics, as a client computing a training gradient does;
* ``bn_mode="eval"``: fixed statistics (mean 0, variance 1), i.e. PyTorch's freshly initialised
  running buffers, breaching's default "eval, public buffers" case for a new model.

This is written from the description above, not copied.

References:
    Geiping, Bauermeister, Droege, Moeller, *Inverting Gradients - How easy is it to break
    privacy in federated learning?*, NeurIPS 2020 (the ConvNet of Sec. 5 and its appendix).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.registry import register_model

BN_MODES = ("train", "eval")


class StatelessBatchNorm(nn.Module):
    """BatchNorm2d with an affine transform and no running buffers.

    Args:
        channels: number of channels.
        mode: ``"train"`` (normalise by the batch's statistics) or ``"eval"`` (by mean 0 and
            variance 1, the statistics of fresh running buffers).
        eps: added to the variance.
    """

    def __init__(self, channels: int, mode: str = "train", eps: float = 1e-5) -> None:
        super().__init__()
        if mode not in BN_MODES:
            raise ConfigError.invalid("bn_mode", f"one of {BN_MODES}", mode)
        self.mode, self.eps = mode, eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "train":
            return F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
        scale = self.weight / (1 + self.eps) ** 0.5
        return x * scale[:, None, None] + self.bias[:, None, None]


class ConvNetBN(nn.Module):
    """Eight conv-BN-ReLU blocks, two 3x3 max-pools, a linear head (the breaching ConvNet).

    Args:
        input_shape: ``(C, H, W)``; H and W at least 9 (two pools of 3).
        out_dim: number of classes.
        width: ``w``; the convolutions have ``w, 2w, 2w, 4w, 4w, 4w, 4w, 4w`` channels.
        bn_mode: ``"train"`` or ``"eval"`` (see the module docstring).

    Example:
        >>> net = ConvNetBN((3, 32, 32), 10, width=16)
        >>> sum(p.numel() for p in net.parameters())
        187114
    """

    def __init__(
        self, input_shape: Sequence[int], out_dim: int, width: int = 16, bn_mode: str = "train"
    ) -> None:
        super().__init__()
        if len(input_shape) != 3 or min(int(s) for s in input_shape[1:]) < 9:
            raise ConfigError.invalid("input_shape", "(C, H, W) with H, W >= 9", input_shape)
        if int(width) < 1 or int(out_dim) < 1:
            raise ConfigError.invalid("width/out_dim", "positive integers", (width, out_dim))
        c, h, w = (int(s) for s in input_shape)
        chans = [c, width, 2 * width, 2 * width, 4 * width, 4 * width, 4 * width, 4 * width]
        chans.append(4 * width)
        layers: list[nn.Module] = []
        for i, (c_in, c_out) in enumerate(zip(chans[:-1], chans[1:])):
            layers += [
                nn.Conv2d(c_in, c_out, 3, padding=1),
                StatelessBatchNorm(c_out, bn_mode),
                nn.ReLU(),
            ]
            if i in (5, 7):
                layers.append(nn.MaxPool2d(3))
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(4 * width * (h // 9) * (w // 9), int(out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


register_model("convnet_bn", ConvNetBN)
