"""Pieces shared by the generative model-inversion attacks: identity losses, selection scores,
augmentations and the surrogate students of model augmentation.

References:
    Struppek et al., "Plug & Play Attacks", ICML 2022 (Poincare loss on l1-normalised logits,
    candidate and final selection by confidence under random transforms).
    Nguyen, Tran, Ngo, Tran, Cheung, "Re-thinking Model Inversion Attacks Against Deep Neural
    Networks", CVPR 2023 (logit loss, model augmentation by distilled surrogates).
    Carlini and Wagner, "Towards Evaluating the Robustness of Neural Networks", S&P 2017 (the
    margin loss).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from scipy.stats import chi2
from torch import nn

from trainleak.data.augment import DiffAugment
from trainleak.models.fitting import fit
from trainleak.models.registry import build_model, model_spec

Loss = Literal["poincare", "ce", "margin", "logit"]
Select = Literal["confidence", "margin"]
Student = Literal["mlp", "convnet", "mixed"]
LOSSES: tuple[Loss, ...] = ("poincare", "ce", "margin", "logit")
SELECTS: tuple[Select, ...] = ("confidence", "margin")
STUDENTS: tuple[Student, ...] = ("mlp", "convnet", "mixed")
_POINCARE_EDGE = 1e-4


def margin(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``z_y - max_{k != y} z_k`` per row."""
    own = logits.gather(1, target[:, None]).squeeze(1)
    others = logits.masked_fill(F.one_hot(target, logits.shape[1]).bool(), float("-inf"))
    return own - others.max(1).values


def identity_loss(
    logits: torch.Tensor, target: torch.Tensor, kind: Loss, temperature: float = 1.0
) -> torch.Tensor:
    """Per-row identity loss (lower = more of class ``target``).

    ``poincare``: the Poincare distance between the l1-normalised logits and the one-hot
    target (shrunk by 1e-4 to stay inside the unit ball), PPA's loss. ``ce``: cross-entropy of
    ``logits / temperature``. ``margin``: minus the margin. ``logit``: minus the target logit.
    """
    if kind == "ce":
        return F.cross_entropy(logits / temperature, target, reduction="none")
    if kind == "margin":
        return -margin(logits, target)
    if kind == "logit":
        return -logits.gather(1, target[:, None]).squeeze(1)
    u = logits / logits.abs().sum(1, keepdim=True).clamp_min(1e-12)
    v = (F.one_hot(target, logits.shape[1]).to(logits) - _POINCARE_EDGE).clamp_min(0)
    num = 2 * (u - v).pow(2).sum(1)
    den = (1 - u.pow(2).sum(1)).clamp_min(1e-12) * (1 - v.pow(2).sum(1)).clamp_min(1e-12)
    return torch.acosh(1 + num / den)


def selection_score(logits: torch.Tensor, target: torch.Tensor, kind: Select) -> torch.Tensor:
    """Per-row score (higher = more of class ``target``): softmax confidence or margin."""
    if kind == "margin":
        return margin(logits, target)
    return torch.softmax(logits, 1).gather(1, target[:, None]).squeeze(1)


def typical_radius(dim: int, mass: float) -> float:
    """Radius of the centred ball that holds ``mass`` of a standard normal in ``dim``
    dimensions: ``sqrt`` of the chi-square quantile (``dim`` degrees of freedom)."""
    return float(math.sqrt(chi2.ppf(mass, dim)))


def augmenter(flip: bool, crop: float = 0.1, rotate: float = 0.0) -> DiffAugment:
    """A random resized crop as a small differentiable affine transform: scale drawn from
    ``[1 - crop, 1 + crop]``, shift up to half of ``crop`` of the side, rotation up to
    ``rotate`` degrees (PPA's crops keep 50-90 % of the area: ``crop`` about 0.3)."""
    return DiffAugment(scale=crop, rotate_deg=rotate, translate=crop / 2, flip=flip)


def noisy(x: torch.Tensor, std: float, gen: torch.Generator) -> torch.Tensor:
    """``x`` plus Gaussian noise of standard deviation ``std`` (``x`` itself when 0)."""
    if not std:
        return x
    return x + std * torch.randn(x.shape, generator=gen, device=gen.device).to(x)


def mean_scores(
    models: list[nn.Module],
    images: torch.Tensor,
    kind: Select,
    transforms: int,
    aug: DiffAugment,
    gen: torch.Generator,
    noise: float = 0.0,
) -> torch.Tensor:
    """``(n, C)`` selection scores of every image for every class, averaged over the models and
    over the untransformed image plus ``transforms`` random transforms (each with Gaussian
    pixel noise of standard deviation ``noise``)."""
    total = torch.zeros(())
    n_views = 0
    with torch.no_grad():
        for t in range(transforms + 1):
            view = images if t == 0 else noisy(aug(images, gen), noise, gen)
            for m in models:
                logits = m(view)
                c = int(logits.shape[1])
                cols = [
                    selection_score(logits, torch.full((len(view),), k, dtype=torch.long), kind)
                    for k in range(c)
                ]
                total = total + torch.stack(cols, 1)
                n_views += 1
    return total / n_views


def surrogates(
    target: nn.Module,
    decoder: nn.Module,
    latent_dim: int,
    count: int,
    *,
    samples: int,
    steps: int,
    gen: torch.Generator,
    arch: Student = "mlp",
    temperature: float = 1.0,
) -> list[nn.Module]:
    """Model augmentation: ``count`` students distilled from the target's soft labels on
    prior samples (Nguyen et al. 2023); seeds drawn from ``gen``.

    ``arch``: ``mlp`` (hidden 256, 128), ``convnet`` (a small ConvNet, width 8: an
    architecture unlike the MLP target, so a latent must carry features that a convolutional
    network reads too, not the target's own adversarial directions) or ``mixed`` (alternating,
    ConvNet first). ``temperature`` divides the target's logits before the softmax of the
    soft labels (above 1: labels that keep the class geometry of a saturated target, e.g.
    one trained with negative label smoothing)."""
    out: list[nn.Module] = []
    with torch.no_grad():
        z = torch.randn(samples, latent_dim, generator=gen, device=gen.device)
        x = decoder(z.to(torch.get_default_device()))
        soft = torch.softmax(target(x) / temperature, 1)
    shape, c = tuple(int(v) for v in x.shape[1:]), int(soft.shape[1])
    for i in range(count):
        conv = arch == "convnet" or (arch == "mixed" and i % 2 == 0)
        spec = (
            model_spec("convnet", input_shape=shape, out_dim=c, width=8)
            if conv and len(shape) == 3 and shape[1] % 4 == 0 and shape[2] % 4 == 0
            else model_spec("mlp", input_shape=shape, hidden=[256, 128], out_dim=c)
        )
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=gen.device))
        student = build_model(spec, seed=seed)
        fit(student, x, soft, steps=steps, lr=0.05, generator=gen, batch_size=128)
        student.eval()
        for p in student.parameters():
            p.requires_grad_(False)
        out.append(student)
    return out
