"""FORA's substitute client: a head of the public architecture, fitted so that its outputs on
the adversary's auxiliary data are distributed like the transcript's smashed rows.

The distance is a multi-kernel maximum mean discrepancy (Gaussian kernels at several
bandwidths around the median pairwise distance), as in FORA; the discriminator term of FORA
is left out ([reconstructed]: MMD alone, see ``docs/decisions.md``).

References:
    Xu et al., "A Stealthy Wolf in Sheep's Clothing: Feature-Oriented Reconstruction Attack
    (FORA) on Split Learning", CVPR 2024.
    Gretton et al., "A Kernel Two-Sample Test", JMLR 13, 2012 (MMD).
"""

from __future__ import annotations

import torch
from torch import nn

from trainleak.attacks.split_learning._common import defend
from trainleak.models.split import split_modules
from trainleak.releases.split_learning import SplitTranscript

_BANDWIDTHS = (0.25, 0.5, 1.0, 2.0, 4.0)


def mk_mmd(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Biased multi-kernel MMD^2 between the rows of ``a`` and ``b`` (flattened)."""
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    z = torch.cat([a, b])
    d2 = torch.cdist(z, z).pow(2)
    scale = d2.detach()[d2.detach() > 0].median().clamp_min(1e-12)
    k = sum(torch.exp(-d2 / (w * scale)) for w in _BANDWIDTHS)
    n = len(a)
    return k[:n, :n].mean() + k[n:, n:].mean() - 2 * k[:n, n:].mean()  # type: ignore[union-attr]


def fit_substitute(
    release: SplitTranscript,
    x_aux: torch.Tensor,
    *,
    steps: int,
    lr: float,
    batch_size: int,
    adaptive: bool,
    generator: torch.Generator,
) -> nn.Module:
    """A substitute head fitted by MMD to the transcript's smashed rows; frozen on return."""
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
    head = split_modules(release.split, seed=seed).head
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    target = release.smashed.float()
    b = max(2, min(batch_size, len(x_aux), len(target)))
    for _ in range(steps):
        xi = torch.randint(len(x_aux), (b,), generator=generator)
        ti = torch.randint(len(target), (b,), generator=generator)
        out = defend(release, head, x_aux[xi], generator, adaptive=adaptive)
        loss = mk_mmd(out, target[ti])
        opt.zero_grad()
        loss.backward()
        opt.step()
    for p in head.parameters():
        p.requires_grad_(False)
    return head
