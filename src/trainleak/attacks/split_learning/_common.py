"""Shared pieces of the split-learning inversion attacks: the adversary's auxiliary images, the
known head, the adaptive adversary's copy of the public defense, and the inverse network."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from trainleak.defenses.split_learning import KDUFSL
from trainleak.errors import ConfigError
from trainleak.models.split import split_modules
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_learning import SplitTranscript


def prior_images(knowledge: Knowledge, release: SplitTranscript) -> torch.Tensor:
    """The adversary's auxiliary inputs (``Knowledge.prior``), checked against the split."""
    x = knowledge.prior
    if x is None or len(x) < 2 or tuple(x.shape[1:]) != tuple(release.split.input_shape):
        raise ConfigError.invalid(
            "prior",
            f"at least 2 auxiliary inputs of shape {tuple(release.split.input_shape)}",
            None if x is None else tuple(x.shape),
        )
    return x.float()


def value_box(knowledge: Knowledge) -> tuple[float, float]:
    """The declared input range, ``(0, 1)`` when unknown."""
    return knowledge.value_range if knowledge.value_range is not None else (0.0, 1.0)


def known_head(release: SplitTranscript, which: str) -> nn.Module:
    """The aggregated head the server holds: the one broadcast at the start of the last
    recorded round (``"round"``) or the final aggregate (``"final"``); frozen."""
    rounds = release.row_rounds()
    agg = release.final if which == "final" else release.aggregate(int(rounds.max()))
    head = split_modules(release.split, head=agg.head, tail=agg.tail).head
    for p in head.parameters():
        p.requires_grad_(False)
    return head


def batch_size_of(release: SplitTranscript) -> int:
    """The clients' batch size, as the transcript shows it (the largest step)."""
    return int(torch.bincount(release.step).max())


def defend(
    release: SplitTranscript,
    head: nn.Module,
    x: torch.Tensor,
    generator: torch.Generator,
    *,
    adaptive: bool,
) -> torch.Tensor:
    """The smashed data of ``x`` as the clients would send it: through the public defense
    (input noise, smashed noise, MDAV in batches of the clients' size) when ``adaptive``,
    else the plain head output."""
    if not adaptive or release.defense is None:
        return head(x)
    d = KDUFSL(release.defense)
    size = batch_size_of(release)
    out = []
    for idx in torch.randperm(len(x), generator=generator).split(size):
        if len(idx) < d.spec.k:
            idx = torch.cat([idx, torch.randperm(len(x), generator=generator)[: d.spec.k]])
        rows = d.transmit(head(d.perturb_input(x[idx], generator)), generator).rows
        out.append((idx, rows))
    full = torch.empty((len(x), *out[0][1].shape[1:]), dtype=out[0][1].dtype)
    for idx, rows in out:
        full[idx] = rows
    return full


class Decoder(nn.Module):
    """The inverse network: for conv smashed data ``(C, h, w)`` and image inputs two
    convolutions and a pixel shuffle up to the input size, otherwise a one-hidden-layer MLP; output squashed into the
    declared input box."""

    def __init__(
        self,
        smashed_shape: tuple[int, ...],
        input_shape: tuple[int, ...],
        width: int,
        box: tuple[float, float],
    ) -> None:
        super().__init__()
        self.input_shape, self.box = input_shape, box
        self.conv = len(smashed_shape) == 3 and len(input_shape) == 3
        if self.conv:
            c_s, c_in = smashed_shape[0], input_shape[0]
            r = max(1, input_shape[1] // smashed_shape[1])
            tail: list[nn.Module] = [nn.PixelShuffle(r)] if r > 1 else []
            if (smashed_shape[1] * r, smashed_shape[2] * r) != tuple(input_shape[1:]):
                tail.append(nn.Upsample(size=tuple(input_shape[1:]), mode="bilinear"))
            self.net: nn.Module = nn.Sequential(
                nn.Conv2d(c_s, width, 3, padding=1),
                nn.ReLU(),
                nn.Conv2d(width, c_in * r * r, 3, padding=1),
                *tail,
            )
        else:
            d_in, d_out = math.prod(smashed_shape), math.prod(input_shape)
            self.net = nn.Sequential(
                nn.Flatten(), nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, d_out)
            )

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        lo, hi = self.box
        out = self.net(s).reshape(len(s), *self.input_shape)
        return lo + (hi - lo) * torch.sigmoid(out)


def train_decoder(
    smashed: torch.Tensor,
    x: torch.Tensor,
    *,
    width: int,
    steps: int,
    lr: float,
    batch_size: int,
    box: tuple[float, float],
    seed: int,
) -> Decoder:
    """Fit a :class:`Decoder` mapping ``smashed`` rows back to ``x`` (MSE, Adam)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        dec = Decoder(tuple(smashed.shape[1:]), tuple(x.shape[1:]), width, box)
    opt = torch.optim.Adam(dec.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    s, x = smashed.detach(), x.detach()
    for _ in range(steps):
        idx = torch.randint(len(x), (min(batch_size, len(x)),), generator=g)
        loss = F.mse_loss(dec(s[idx]), x[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    dec.eval()
    return dec


@torch.no_grad()
def decode(dec: Decoder, smashed: torch.Tensor, chunk: int = 512) -> torch.Tensor:
    """Apply a decoder to every row, in chunks."""
    return torch.cat([dec(part) for part in smashed.split(chunk)])
