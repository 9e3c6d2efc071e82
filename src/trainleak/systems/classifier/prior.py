"""Train the adversary's generative prior on the public split (other classes of the same
domain): a small VAE, or a GAN whose generator has the VAE's convolutional decoder layout,
published as a :class:`GenerativePrior` (the decoder or generator only).

References:
    Kingma and Welling, "Auto-Encoding Variational Bayes", ICLR 2014.
    Zhang et al., "The Secret Revealer: Generative Model-Inversion Attacks Against Deep Neural
    Networks", CVPR 2020 (a GAN trained on public data as the attack's prior).
    Lim and Ye, "Geometric GAN", 2017 (the hinge loss).
    Zhao et al., "Differentiable Augmentation for Data-Efficient GAN Training", NeurIPS 2020
    (augmenting real and generated images alike, so a GAN trains on a few hundred images).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from trainleak.errors import ConfigError
from trainleak.models.generative import VAE
from trainleak.models.registry import build_model, model_spec
from trainleak.progress import Progress, report_every
from trainleak.releases.classifier import GenerativePrior
from trainleak.validation import check_fields, param


@dataclass(frozen=True, kw_only=True)
class PriorSettings:
    """Prior settings.

    Attributes:
        kind: ``"vae"`` or ``"gan"`` (a hinge-loss GAN whose generator is the convolutional
            decoder with ``channels`` maps, trained with differentiable augmentation; the
            release is the same kind of decoder either way).
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
        gan_lr, gan_batch: the GAN's Adam rate (both networks, betas (0, 0.99)) and batch.
        d_channels: the GAN critic's first feature maps.
        translate: the GAN's augmentation shift, as a fraction of the image side (also a
            brightness/contrast jitter of +-10 % / x0.75-1.25, and with ``flip`` a random
            mirror).
    """

    kind: str = "vae"

    latent_dim: int = param(16, ge=1, integer=True)
    hidden: tuple[int, ...] = (256, 512)
    steps: int = param(3000, ge=1, integer=True)
    lr: float = param(1e-3, gt=0)
    batch_size: int = param(128, ge=1, integer=True)
    beta: float = param(1.0, gt=0)
    channels: int = param(0, ge=0, integer=True)
    flip: bool = False
    gan_lr: float = param(2e-4, gt=0)
    gan_batch: int = param(64, ge=1, integer=True)
    d_channels: int = param(32, ge=1, integer=True)
    translate: float = param(0.125, ge=0, le=0.5)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.kind not in ("vae", "gan"):
            raise ConfigError.invalid("kind", "'vae' or 'gan'", self.kind)
        if self.kind == "gan" and not self.channels:
            raise ConfigError.invalid(
                "channels", "> 0 for a GAN (its generator is convolutional)", 0
            )


def train_prior(
    x: torch.Tensor,
    settings: PriorSettings,
    *,
    value_range: tuple[float, float] = (0.0, 1.0),
    public_classes: tuple[str, ...] = (),
    seed: int = 0,
    progress: Progress | None = None,
) -> GenerativePrior:
    """Train a VAE (or a GAN, ``settings.kind``) on the public images ``x`` and return its
    decoder (generator) as a prior; ``progress("prior", step, steps)`` every 50 steps.

    The VAE's reconstruction term is the Bernoulli log-likelihood of the images scaled to
    ``[0, 1]``.
    """
    lo, hi = value_range
    if settings.kind == "gan":
        return _train_gan(x, settings, value_range, public_classes, seed, progress)
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
    for step in range(settings.steps):
        report_every(progress, "prior", step, settings.steps)
        idx = torch.randperm(len(x), generator=gen, device=gen.device)[: settings.batch_size]
        idx = idx.to(x.device)
        xb, tb = x[idx], target01[idx]
        if settings.flip:
            xb, tb = _random_mirror(gen, xb, tb)
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
    report_every(progress, "prior", settings.steps, settings.steps)
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


def _random_mirror(generator: torch.Generator, *batches: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each image mirrored left-right with probability 1/2, one draw per image shared by the
    aligned ``batches`` (images and their targets)."""
    first = batches[0]
    mirror = torch.rand(len(first), generator=generator, device=generator.device) < 0.5
    mask = mirror.to(first.device)[:, None, None, None]
    return tuple(torch.where(mask, b.flip(-1), b) for b in batches)


def diff_augment(
    x: torch.Tensor, generator: torch.Generator, *, translate: float, flip: bool, span: float
) -> torch.Tensor:
    """Random mirror (if ``flip``), integer shift by up to ``translate`` of the side (edges
    replicated) and brightness (+-10 % of ``span``) / contrast (x0.75-1.25) jitter, drawn per
    image and differentiable in ``x`` (the same kind of transform for real and generated
    images, DiffAugment's point)."""
    n, _, h, w = x.shape
    dev = generator.device
    if flip:
        (x,) = _random_mirror(generator, x)
    s = int(round(translate * min(h, w)))
    if s:
        pad = F.pad(x, (s, s, s, s), mode="replicate")
        dy = torch.randint(0, 2 * s + 1, (n,), generator=generator, device=dev).to(x.device)
        dx = torch.randint(0, 2 * s + 1, (n,), generator=generator, device=dev).to(x.device)
        rows = dy[:, None] + torch.arange(h, device=x.device)[None]
        cols = dx[:, None] + torch.arange(w, device=x.device)[None]
        batch = torch.arange(n, device=x.device)[:, None, None]
        # advanced indexing puts the (n, h, w) index dims first, then the channels
        x = pad.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)
    b = (torch.rand(n, 1, 1, 1, generator=generator, device=dev).to(x.device) - 0.5) * 0.2 * span
    c = torch.rand(n, 1, 1, 1, generator=generator, device=dev).to(x.device) * 0.5 + 0.75
    m = x.mean((1, 2, 3), keepdim=True)
    return (x - m) * c + m + b


def _train_gan(
    x: torch.Tensor,
    settings: PriorSettings,
    value_range: tuple[float, float],
    public_classes: tuple[str, ...],
    seed: int,
    progress: Progress | None,
) -> GenerativePrior:
    """Hinge-loss GAN (one critic step per generator step) with differentiable augmentation;
    the generator is a
    :class:`~trainleak.models.generative.ConvVAEDecoder` fed standard-normal latents."""
    lo, hi = value_range
    shape = tuple(int(s) for s in x.shape[1:])
    spec = model_spec(
        "vae_conv_decoder",
        latent_dim=settings.latent_dim,
        input_shape=shape,
        channels=settings.channels,
        low=lo,
        high=hi,
    )
    gen_net = build_model(spec, seed=seed).to(x.device)
    critic_spec = model_spec(
        "gan_critic", input_shape=shape, channels=settings.d_channels, low=lo, high=hi
    )
    critic = build_model(critic_spec, seed=seed + 1).to(x.device)
    gen = torch.Generator().manual_seed(seed)
    opt_g = torch.optim.Adam(gen_net.parameters(), lr=settings.gan_lr, betas=(0.0, 0.99))
    opt_d = torch.optim.Adam(critic.parameters(), lr=settings.gan_lr, betas=(0.0, 0.99))

    def aug(v: torch.Tensor) -> torch.Tensor:
        return diff_augment(v, gen, translate=settings.translate, flip=settings.flip, span=hi - lo)

    n = settings.gan_batch
    for step in range(settings.steps):
        report_every(progress, "prior", step, settings.steps)
        idx = torch.randint(0, len(x), (n,), generator=gen).to(x.device)
        z = torch.randn(n, settings.latent_dim, generator=gen).to(x.device)
        fake = gen_net(z)
        loss_d = (
            F.relu(1 - critic(aug(x[idx]))).mean() + F.relu(1 + critic(aug(fake.detach()))).mean()
        )
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = -critic(aug(fake)).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
    report_every(progress, "prior", settings.steps, settings.steps)
    state = {k: v.detach().cpu().clone() for k, v in gen_net.state_dict().items()}
    return GenerativePrior(
        spec,
        state,
        settings.latent_dim,
        shape,  # type: ignore[arg-type]
        (lo, hi),
        tuple(public_classes),
    )
