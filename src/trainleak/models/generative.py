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

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        """Pre-sigmoid outputs ``(n, C, H, W)`` (the VAE's Bernoulli likelihood reads them)."""
        return self.net(z).view(-1, *self.input_shape)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self._box(self.logits(z))

    def _box(self, logits: torch.Tensor) -> torch.Tensor:
        return self.low + (self.high - self.low) * torch.sigmoid(logits)

    @property
    def feature_depths(self) -> int:
        """How many intermediate feature layers :meth:`features` can stop at (the hidden
        layers: depth 1 is the output of the first hidden layer's activation)."""
        return (len(self.net) - 1) // 2

    def _check_depth(self, depth: int) -> None:
        if not 1 <= int(depth) <= self.feature_depths:
            raise ConfigError.invalid(
                "feature_depth", f"between 1 and {self.feature_depths} for this decoder", depth
            )

    def features(self, z: torch.Tensor, depth: int) -> torch.Tensor:
        """The decoder's intermediate features of ``z`` after ``depth`` hidden layers;
        ``from_features(features(z, d), d)`` equals ``forward(z)``."""
        self._check_depth(depth)
        return self.net[: 2 * depth](z)

    def from_features(self, h: torch.Tensor, depth: int) -> torch.Tensor:
        """Images from intermediate features taken at ``depth`` (the rest of the decoder)."""
        self._check_depth(depth)
        return self._box(self.net[2 * depth :](h).view(-1, *self.input_shape))


def _ups(input_shape: tuple[int, ...]) -> int:
    """Doublings of the convolutional decoder: three from an eighth of the side (two for
    sides under 16, one under 8)."""
    side = min(input_shape[1:])
    return 3 if side >= 16 else (2 if side >= 8 else 1)


class ConvVAEDecoder(VAEDecoder):
    """DCGAN-style decoder ``z -> image``: a linear map to ``channels`` maps at an eighth of
    the image side, then doublings (nearest upsampling and a 3 x 3 convolution, LeakyReLU,
    channels halved each time) and a 3 x 3 convolution to the image channels, cropped to
    ``(H, W)``; outputs in ``[low, high]`` through a sigmoid.

    Args:
        latent_dim, input_shape, low, high: as :class:`VAEDecoder`.
        channels: feature maps after the linear map.

    References:
        Radford, Metz and Chintala, "Unsupervised Representation Learning with Deep
        Convolutional Generative Adversarial Networks", ICLR 2016 (the generator's layout).
        Odena, Dumoulin and Olah, "Deconvolution and Checkerboard Artifacts", Distill 2016
        (upsampling and convolution instead of transposed convolutions).
    """

    def __init__(
        self,
        latent_dim: int,
        input_shape: Sequence[int],
        channels: int = 64,
        low: float = 0.0,
        high: float = 1.0,
    ) -> None:
        super().__init__(latent_dim, input_shape, (8,), low, high)
        k = _ups(self.input_shape)
        if int(channels) < 2**k:
            raise ConfigError.invalid("channels", f"at least {2**k}", channels)
        c, h, w = self.input_shape
        self.start = (-(-h // 2**k), -(-w // 2**k))
        self.channels = int(channels)
        self.net = nn.Sequential(nn.Linear(self.latent_dim, self.channels * math.prod(self.start)))
        layers: list[nn.Module] = [nn.LeakyReLU(0.2)]
        ch = self.channels
        for _ in range(k):
            layers += [
                nn.Upsample(scale_factor=2.0, mode="nearest"),
                nn.Conv2d(ch, ch // 2, 3, padding=1),
                nn.LeakyReLU(0.2),
            ]
            ch //= 2
        layers.append(nn.Conv2d(ch, c, 3, padding=1))
        self.conv = nn.Sequential(*layers)

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        h = self.net(z).view(-1, self.channels, *self.start)
        _, height, width = self.input_shape
        return self.conv(h)[:, :, :height, :width]

    @property
    def feature_depths(self) -> int:
        """Depth 1: the activated maps after the linear map; each doubling adds one."""
        return 1 + (len(self.conv) - 2) // 3

    def features(self, z: torch.Tensor, depth: int) -> torch.Tensor:
        self._check_depth(depth)
        return self.conv[: 1 + 3 * (depth - 1)](self.net(z).view(-1, self.channels, *self.start))

    def from_features(self, h: torch.Tensor, depth: int) -> torch.Tensor:
        self._check_depth(depth)
        _, height, width = self.input_shape
        return self._box(self.conv[1 + 3 * (depth - 1) :](h)[:, :, :height, :width])


class Discriminator(nn.Module):
    """DCGAN-style critic for training a :class:`ConvVAEDecoder` as a GAN generator: a
    3 x 3 convolution, then strided 4 x 4 convolutions (channels doubled from the second on) down
    to at most 4 x 4, every layer spectrally normalised, and a linear score. It trains the
    generator and is never released.

    Args:
        input_shape: ``(C, H, W)`` of the images it scores.
        channels: feature maps of the first layer.
        low, high: the value box of the images (mapped to ``[-1, 1]`` first).

    References:
        Miyato et al., "Spectral Normalization for Generative Adversarial Networks", ICLR 2018.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        channels: int = 32,
        low: float = 0.0,
        high: float = 1.0,
    ) -> None:
        super().__init__()
        if len(input_shape) != 3 or int(channels) < 1 or not float(high) > float(low):
            raise ConfigError.invalid(
                "discriminator",
                "input_shape (C, H, W), channels >= 1, high > low",
                (tuple(input_shape), channels, low, high),
            )
        c, h, w = (int(s) for s in input_shape)
        self.low, self.high = float(low), float(high)
        sn = nn.utils.parametrizations.spectral_norm
        layers: list[nn.Module] = [sn(nn.Conv2d(c, int(channels), 3, padding=1)), nn.LeakyReLU(0.2)]
        ch = out = int(channels)
        while min(h, w) > 4:
            layers += [sn(nn.Conv2d(ch, out, 4, stride=2, padding=1)), nn.LeakyReLU(0.2)]
            ch, out, h, w = out, 2 * out, h // 2, w // 2
        self.net = nn.Sequential(*layers, nn.Flatten())
        self.out = sn(nn.Linear(ch * h * w, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scaled = 2 * (x - self.low) / (self.high - self.low) - 1
        out: torch.Tensor = self.out(self.net(scaled)).squeeze(1)
        return out


class VAE(nn.Module):
    """A Gaussian-latent VAE with MLP encoder and :class:`VAEDecoder`.

    Args:
        latent_dim: size of the latent vector.
        input_shape: ``(C, H, W)``.
        hidden: hidden widths of the MLP decoder (the encoder mirrors them).
        low, high: the value box of the images.
        channels: ``0`` for the MLP decoder, else the feature maps of a
            :class:`ConvVAEDecoder` (the encoder stays an MLP: it is never released).
    """

    def __init__(
        self,
        latent_dim: int,
        input_shape: Sequence[int],
        hidden: Sequence[int] = (256, 512),
        low: float = 0.0,
        high: float = 1.0,
        channels: int = 0,
    ) -> None:
        super().__init__()
        self.decoder: VAEDecoder = (
            ConvVAEDecoder(latent_dim, input_shape, channels, low, high)
            if channels
            else VAEDecoder(latent_dim, input_shape, hidden, low, high)
        )
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
