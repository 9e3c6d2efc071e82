"""The LPIPS formula as an explicit feature map psi, for any backbone.

LPIPS(x, y) = sum_l 1/(H_l W_l) sum_{h,w} || w_l * (f_l(x) - f_l(y))_{hw} ||^2 with f_l the
channel-normalised activations of layer l (Zhang et al., CVPR 2018). Stacking
psi_l(x) = w_l * f_l(x) / sqrt(H_l W_l) over layers gives LPIPS(x, y) = ||psi(x) - psi(y)||^2,
so lower bounds on squared error in psi-space are lower bounds on expected LPIPS. Each
coordinate of psi is bounded by w_{l,c} / sqrt(H_l W_l) because normalised channel vectors
have entries in [-1, 1]; the bound uses that range.

References:
    Zhang, Isola, Efros, Shechtman & Wang, *The Unreasonable Effectiveness of Deep Features as
    a Perceptual Metric*, CVPR 2018 (code: richzhang/PerceptualSimilarity).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.spec import load_state_dict


class LPIPSFormulaMap(nn.Module):
    """psi(x) for a backbone returning a list of feature maps, with per-channel weights.

    Args:
        backbone: module mapping ``(n, C, H, W)`` images to a list of ``(n, C_l, H_l, W_l)``.
        weights: per-layer non-negative channel weights w_l (LPIPS: sqrt of the linear heads).
        name: what the feature space is (shown in reports); never "LPIPS" unless it is.
        eps: added to channel norms (LPIPS uses 1e-10).
    """

    def __init__(
        self, backbone: nn.Module, weights: Sequence[torch.Tensor], name: str, eps: float = 1e-10
    ) -> None:
        super().__init__()
        if any(float(w.min()) < 0 for w in weights):
            raise ConfigError.invalid("weights", "non-negative channel weights", "negative")
        self.backbone = backbone
        self.weights = [w.detach().double().flatten() for w in weights]
        self.name, self.eps = name, eps
        self._sizes: list[tuple[int, int]] = []

    def layers(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The weighted, normalised, location-averaged layers psi_l(x), ``(n, C_l, H_l, W_l)``."""
        feats = self.backbone(x)
        if len(feats) != len(self.weights):
            n_w = len(self.weights)
            raise ConfigError.invalid("weights", f"{len(feats)} layers of weights", n_w)
        out = []
        self._sizes = []
        for f, w in zip(feats, self.weights):
            f = f.double()
            f = f / (f.norm(dim=1, keepdim=True) + self.eps)
            h, wd = f.shape[-2:]
            self._sizes.append((int(h), int(wd)))
            out.append(f * w.view(1, -1, 1, 1) / (h * wd) ** 0.5)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """psi(x), shape ``(n, F)``."""
        return torch.cat([p.flatten(1) for p in self.layers(x)], dim=1)

    def distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The LPIPS-formula distance ||psi(x) - psi(y)||^2 per pair, shape ``(n,)``."""
        return ((self(x) - self(y)) ** 2).sum(1)

    def coordinate_scale(self) -> torch.Tensor:
        """Per-coordinate bound on |psi_j| (set after one forward pass), shape ``(F,)``."""
        if not self._sizes:
            raise ConfigError("call the feature map once before asking for its coordinate scale")
        parts = [
            (w / (h * wd) ** 0.5).repeat_interleave(h * wd)
            for w, (h, wd) in zip(self.weights, self._sizes)
        ]
        return torch.cat(parts).clamp_min(1e-12)


class _AlexNetTrunk(nn.Module):
    """torchvision's AlexNet ``features`` (same parameter names), returning the 5 ReLU outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(),
        )  # fmt: skip
        self.register_buffer("shift", torch.tensor([-0.030, -0.088, -0.188]).view(1, 3, 1, 1))
        self.register_buffer("scale", torch.tensor([0.458, 0.448, 0.450]).view(1, 3, 1, 1))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        shift, scale = self.get_buffer("shift"), self.get_buffer("scale")
        h = ((2.0 * x - 1.0) - shift) / scale  # LPIPS expects [-1, 1] inputs
        outs = []
        for i, layer in enumerate(self.features):
            h = layer(h)
            if i in (1, 4, 7, 9, 11):
                outs.append(h)
        return outs


def load_lpips_alexnet(backbone_file: str | Path, linear_file: str | Path) -> LPIPSFormulaMap:
    """The real LPIPS (AlexNet) from user-supplied weight files, loaded without unpickling.

    Args:
        backbone_file: torchvision AlexNet weights (keys ``features.*``), safetensors or a
            plain-tensor torch file (read with ``weights_only=True``).
        linear_file: the LPIPS linear heads (``alex.pth`` of the ``lpips`` package, keys
            ``lin{l}.model.1.weight`` of shape ``(1, C_l, 1, 1)``).

    Raises:
        UnsafeFileError: a file would need unpickling arbitrary objects.
        ConfigError: a file lacks the expected keys.
    """
    trunk = _AlexNetTrunk()
    state = {k: v for k, v in load_state_dict(backbone_file).items() if k.startswith("features.")}
    missing = set(trunk.features.state_dict()) - {k[len("features.") :] for k in state}
    if missing:
        raise ConfigError.invalid("backbone_file", "torchvision AlexNet weights", sorted(missing))
    trunk.load_state_dict({**state, "shift": trunk.shift, "scale": trunk.scale})
    lin = load_state_dict(linear_file)
    try:
        weights = [lin[f"lin{i}.model.1.weight"].flatten().clamp_min(0).sqrt() for i in range(5)]
    except KeyError:
        raise ConfigError.invalid("linear_file", "LPIPS heads lin0..lin4", sorted(lin)) from None
    return LPIPSFormulaMap(trunk.eval(), weights, name="LPIPS (AlexNet, user-supplied)")
