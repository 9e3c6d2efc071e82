"""Train the adversary's generative prior: a small VAE on the public split (other classes of
the same domain), published as a :class:`GenerativePrior` (the decoder only).

References:
    Kingma and Welling, "Auto-Encoding Variational Bayes", ICLR 2014.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from trainleak.models.generative import VAE
from trainleak.models.registry import build_model, model_spec
from trainleak.releases.classifier import GenerativePrior
from trainleak.validation import check_fields, param


@dataclass(frozen=True, kw_only=True)
class PriorSettings:
    """VAE settings.

    Attributes:
        latent_dim: size of the latent.
        hidden: decoder hidden widths (the encoder mirrors them).
        steps: Adam steps.
        lr: learning rate.
        batch_size: minibatch size.
        beta: weight of the KL term (below 1: sharper samples, a less regular latent).
        channels: ``0`` for the MLP decoder, else the feature maps of the DCGAN-style
            convolutional decoder (:class:`~trainleak.models.generative.ConvVAEDecoder`).
        flip: train on random horizontal mirror images too (faces: a mirrored public face is
            another public face; the split is unchanged).
    """

    latent_dim: int = param(16, ge=1, integer=True)
    hidden: tuple[int, ...] = (256, 512)
    steps: int = param(3000, ge=1, integer=True)
    lr: float = param(1e-3, gt=0)
    batch_size: int = param(128, ge=1, integer=True)
    beta: float = param(1.0, gt=0)
    channels: int = param(0, ge=0, integer=True)
    flip: bool = False

    def __post_init__(self) -> None:
        check_fields(self)


def train_prior(
    x: torch.Tensor,
    settings: PriorSettings,
    *,
    value_range: tuple[float, float] = (0.0, 1.0),
    public_classes: tuple[str, ...] = (),
    seed: int = 0,
) -> GenerativePrior:
    """Train a VAE on the public images ``x`` and return its decoder as a prior.

    The reconstruction term is the Bernoulli log-likelihood of the images scaled to ``[0, 1]``.
    """
    lo, hi = value_range
    spec = model_spec(
        "vae",
        latent_dim=settings.latent_dim,
        input_shape=tuple(x.shape[1:]),
        hidden=settings.hidden,
        low=lo,
        high=hi,
        **({"channels": settings.channels} if settings.channels else {}),
    )
    vae = build_model(spec, seed=seed)
    if not isinstance(vae, VAE):
        raise TypeError("the 'vae' architecture must build a VAE")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(vae.parameters(), lr=settings.lr)
    target01 = ((x - lo) / (hi - lo)).clamp(0, 1)
    for _ in range(settings.steps):
        idx = torch.randperm(len(x), generator=gen, device=gen.device)[: settings.batch_size]
        idx = idx.to(x.device)
        xb, tb = x[idx], target01[idx]
        if settings.flip:
            mirror = torch.rand(len(idx), generator=gen, device=gen.device) < 0.5
            mirror = mirror.to(x.device)[:, None, None, None]
            xb, tb = torch.where(mirror, xb.flip(-1), xb), torch.where(mirror, tb.flip(-1), tb)
        mu, logvar = vae.encode(xb)
        noise = torch.randn(mu.shape, generator=gen, device=gen.device).to(mu.device)
        z = mu + noise * (0.5 * logvar).exp()
        logits = vae.decoder.logits(z)
        rec = F.binary_cross_entropy_with_logits(logits, tb, reduction="sum")
        kl = 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum()
        loss = (rec + settings.beta * kl) / len(idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dec_state = {
        k[len("decoder.") :]: v.detach().cpu().clone()
        for k, v in vae.state_dict().items()
        if k.startswith("decoder.")
    }
    kwargs = dict(spec.kwargs)
    if settings.channels:
        kwargs.pop("hidden")
    kind = "vae_conv_decoder" if settings.channels else "vae_decoder"
    dec_spec = model_spec(kind, **kwargs)
    return GenerativePrior(
        dec_spec,
        dec_state,
        settings.latent_dim,
        tuple(x.shape[1:]),  # type: ignore[arg-type]
        (lo, hi),
        tuple(public_classes),
    )
