"""A small VAE whose decoder is the generative prior of model-inversion attacks.

The decoder maps a latent ``z`` to an image inside the declared value box with a sigmoid, so
every image it produces is a valid input of the attacked classifier. The encoder exists only to
train the decoder (on public data) and is never released with the prior.

References:
    Kingma and Welling, "Auto-Encoding Variational Bayes", ICLR 2014.
    Zhang et al., "The Secret Revealer: Generative Model-Inversion Attacks Against Deep Neural
    Networks", CVPR 2020 (a generative prior trained on public data, searched in latent space).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError


def _mlp(widths: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(nn.LeakyReLU(0.2))
    return nn.Sequential(*layers)


class VAEDecoder(nn.Module):
    """MLP decoder ``z -> image`` with outputs in ``[low, high]``.

    Args:
        latent_dim: size of the latent vector.
        input_shape: ``(C, H, W)`` of the images it produces.
        hidden: hidden widths, from the latent up.
        low, high: the value box of the images.
    """

    def __init__(
        self,
        latent_dim: int,
        input_shape: Sequence[int],
        hidden: Sequence[int] = (256, 512),
        low: float = 0.0,
        high: float = 1.0,
    ) -> None:
        super().__init__()
        if int(latent_dim) < 1 or len(input_shape) != 3 or not float(high) > float(low):
            raise ConfigError.invalid(
                "decoder",
                "latent_dim >= 1, input_shape (C, H, W), high > low",
                (latent_dim, tuple(input_shape), low, high),
            )
        self.latent_dim = int(latent_dim)
        self.input_shape = tuple(int(s) for s in input_shape)
        self.low, self.high = float(low), float(high)
        d = math.prod(self.input_shape)
        self.net = _mlp([self.latent_dim, *[int(h) for h in hidden], d])

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = torch.sigmoid(self.net(z)).view(-1, *self.input_shape)
        return self.low + (self.high - self.low) * out


class VAE(nn.Module):
    """A Gaussian-latent VAE with MLP encoder and :class:`VAEDecoder`.

    Args:
        latent_dim: size of the latent vector.
        input_shape: ``(C, H, W)``.
        hidden: hidden widths of the decoder (the encoder mirrors them).
        low, high: the value box of the images.
    """

    def __init__(
        self,
        latent_dim: int,
        input_shape: Sequence[int],
        hidden: Sequence[int] = (256, 512),
        low: float = 0.0,
        high: float = 1.0,
    ) -> None:
        super().__init__()
        self.decoder = VAEDecoder(latent_dim, input_shape, hidden, low, high)
        d = math.prod(self.decoder.input_shape)
        self.encoder = _mlp([d, *[int(h) for h in reversed(list(hidden))], 2 * int(latent_dim)])

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and log-variance of ``x`` (scaled to ``[0, 1]`` first)."""
        dec = self.decoder
        h = self.encoder(((x - dec.low) / (dec.high - dec.low)).flatten(1))
        mu, logvar = h.chunk(2, dim=1)
        return mu, logvar.clamp(-10, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu, _ = self.encode(x)
        return self.decoder(mu)
