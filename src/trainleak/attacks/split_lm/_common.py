"""Shared parts of the split-LM inversion attacks: the public bottom, training pairs on public
text (clean, or through the transcript's public defense algorithm with the adversary's own
secrets: the adaptive setting), and a per-position inverter network."""

from __future__ import annotations

import torch
from torch import nn

from trainleak.defenses.split_text import obfuscate
from trainleak.errors import ConfigError
from trainleak.models.language import embedding
from trainleak.models.split_lm import SplitLM, seeded_init
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_text import TextDefenseSpec, TextSplitTranscript

N_SPECIAL = 4  # the word tokenizer's <pad>, <unk>, <bos>, <eos> come first


def embedding_table(release: TextSplitTranscript) -> torch.Tensor:
    """The public input embedding table ``(vocab, d)``."""
    weight: torch.Tensor = embedding(release.public_lm).weight  # type: ignore[assignment]
    return weight.detach()


def public_bottom(release: TextSplitTranscript) -> SplitLM:
    """The public model cut at the transcript's split (the server knows both)."""
    return SplitLM(release.public_lm, release.split)


def public_ids(knowledge: Knowledge, release: TextSplitTranscript) -> torch.Tensor:
    """The adversary's public token ids ``(n, L)`` (``knowledge.prior``), checked."""
    prior = knowledge.prior
    vocab = len(release.public_lm.tokenizer)
    if prior is None or prior.ndim != 2 or prior.dtype != torch.long:
        raise ConfigError("knowledge.prior must hold public token ids, an int64 (n, L) tensor")
    if int(prior.min()) < 0 or int(prior.max()) >= vocab:
        raise ConfigError(f"knowledge.prior has token ids outside the vocabulary [0, {vocab})")
    return prior


def random_rows(
    ids: torch.Tensor, n: int, vocab: int, gen: torch.Generator, pad: int
) -> torch.Tensor:
    """``n`` rows shaped like ``ids`` (the same BOS, lengths drawn from ``ids``) whose tokens are
    uniform over the non-special vocabulary: they cover tokens rare in public text."""
    pick = torch.randint(0, ids.shape[0], (n,), generator=gen)
    like = ids[pick].clone()
    body = torch.randint(N_SPECIAL, vocab, like.shape, generator=gen)
    real = like != pad
    real[:, 0] = False
    return torch.where(real, body, like)


def training_pairs(
    model: SplitLM,
    ids: torch.Tensor,
    spec: TextDefenseSpec,
    adaptive: bool,
    gen: torch.Generator,
    random_share: float = 0.0,
    batch: int = 64,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(hidden, target ids, keep)``: public rows (plus ``random_share`` times as many rows of
    random tokens) through the public bottom, with the defense applied with fresh secrets when
    ``adaptive`` (targets are the ids after any decoy insertion, aligned with what the server
    receives)."""
    tok = model.lm.tokenizer
    pad = int(tok.pad_token_id)
    extra = int(round(random_share * ids.shape[0]))
    aux = ids
    if extra:
        ids = torch.cat([ids, random_rows(ids, extra, len(tok), gen, pad)])
    use = spec if adaptive else TextDefenseSpec()
    hs, ts, ks = [], [], []
    with torch.no_grad():
        for s in range(0, ids.shape[0], batch):
            part = ids[s : s + batch]
            mask = (part != pad).long()
            mask[:, 0] = 1
            ob = obfuscate(use, part, mask, model.bottom, aux, len(tok), pad, gen)
            hs.append(ob.hidden.flatten(0, 1))
            ts.append(ob.ids.flatten())
            ks.append(ob.mask.flatten().bool())
    return torch.cat(hs), torch.cat(ts), torch.cat(ks)


def features(hidden: torch.Tensor, spec: TextDefenseSpec, sign_invariant: bool) -> torch.Tensor:
    """The inverter's input: the hidden states, or their channel magnitudes ``|h|`` when
    ``sign_invariant`` and the defense ``spec`` flips channel signs with a secret mask. A sign
    mask (InstaHide, TextHide, MIXGUARD's optional signs) leaves every ``|h_c|`` unchanged, so
    an attacker who knows the mask is part of the algorithm reads the magnitudes and drops the
    signs, which carry only the mask (the absolute-value step of Carlini et al., "Is Private
    Learning Possible with Instance Encoding?", IEEE S&P 2021, against InstaHide)."""
    masked = spec.kind == "mixguard" and spec.signs
    return hidden.abs() if sign_invariant and masked else hidden


class Inverter(nn.Module):
    """Hidden state -> token logits, per position: an MLP to the embedding space, scored
    against the public embedding table (kept fixed), so tokens rare in the training text are
    still reachable. A one-block bottom keeps each token's identity mostly in its own
    position's residual stream."""

    def __init__(self, d: int, table: torch.Tensor, width: int) -> None:
        super().__init__()
        e = table.shape[1]
        self.net = nn.Sequential(
            nn.LayerNorm(d), nn.Linear(d, width), nn.GELU(), nn.Linear(width, e)
        )
        self.register_buffer("table", table.detach().clone())
        self.bias = nn.Parameter(torch.zeros(table.shape[0]))
        self.scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.scale * self.net(h) @ self.table.T + self.bias
        return out


def fit_inverter(
    pairs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    table: torch.Tensor,
    steps: int,
    lr: float,
    batch_size: int,
    width: int,
    gen: torch.Generator,
) -> Inverter:
    """Train an :class:`Inverter` by cross-entropy on the real positions of ``pairs``."""
    h, t, keep = pairs
    h, t = h[keep], t[keep]
    inv = Inverter(h.shape[1], table, width)
    seeded_init(inv, gen)
    opt = torch.optim.Adam(inv.parameters(), lr=lr)
    for _ in range(steps):
        idx = torch.randint(0, h.shape[0], (batch_size,), generator=gen)
        loss = nn.functional.cross_entropy(inv(h[idx]), t[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    inv.eval()
    return inv


def inverter_logits(
    release: TextSplitTranscript,
    knowledge: Knowledge,
    *,
    adaptive: bool,
    random_share: float,
    steps: int,
    lr: float,
    batch_size: int,
    width: int,
    gen: torch.Generator,
    sign_invariant: bool = False,
) -> tuple[SplitLM, torch.Tensor, torch.Tensor]:
    """Train an inverter on the adversary's public text through the public bottom (obfuscated
    by the transcript's defense algorithm when ``adaptive``) and decode every received row
    (reading channel magnitudes under a secret sign mask when ``sign_invariant``, see
    :func:`features`).

    Returns:
        The public bottom, the ``(n, L, V)`` token logits of the received rows, and the number
        of real training positions.
    """
    model = public_bottom(release)
    ids = public_ids(knowledge, release)
    h, t, keep = training_pairs(model, ids, release.defense, adaptive, gen, random_share)
    pairs = (features(h, release.defense, sign_invariant), t, keep)
    inv = fit_inverter(pairs, embedding_table(release), steps, lr, batch_size, width, gen)
    with torch.no_grad():
        logits = inv(features(release.smashed, release.defense, sign_invariant))
    return model, logits, pairs[2].sum()
