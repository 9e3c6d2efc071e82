"""The project's own feature network, trained here on the data set at hand (not LPIPS).

A two-layer convolutional classifier (4 then 8 channels, stride 2, ReLU) trained with Adam on
the given images; its two ReLU outputs, unit-normalised per location and equally weighted, form
the feature space of the offline feature-space bound. [inferred] The architecture and equal
weights are design decisions: LPIPS's ImageNet trunk cannot be obtained offline, and a network
trained on the data itself is a perceptual-style space that the tests can build in seconds.
"""

from __future__ import annotations

import torch
from torch import nn

from trainleak.data import ImageDataset
from trainleak.metrics.features.lpips_formula import LPIPSFormulaMap
from trainleak.validation import check_positive


class _ConvFeatures(nn.Module):
    def __init__(self, channels: int, n_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 4, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.head = nn.LazyLinear(n_classes)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        h1 = torch.relu(self.conv1(x))
        return [h1, torch.relu(self.conv2(h1))]

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self(x)[-1].flatten(1))


def train_feature_net(
    data: ImageDataset, *, steps: int = 300, lr: float = 0.01, seed: int = 0
) -> LPIPSFormulaMap:
    """Train the project's feature network on ``data`` and wrap it in the LPIPS formula.

    Args:
        data: labelled images.
        steps: full-batch Adam steps.
        lr: Adam learning rate.
        seed: seed of the initialisation (local; global RNG state is restored).

    Returns:
        An :class:`LPIPSFormulaMap` named ``"trainleak-convfeat"`` (equal channel weights).
    """
    check_positive("steps", steps)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = _ConvFeatures(data.x.shape[1], data.num_classes)
        net.logits(data.x[:2])  # materialise the lazy head
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net.logits(data.x), data.y).backward()
        opt.step()
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    weights = [torch.ones(4), torch.ones(8)]
    name = "trainleak-convfeat (own 2-layer conv net; not LPIPS)"
    return LPIPSFormulaMap(net, weights, name=name)
