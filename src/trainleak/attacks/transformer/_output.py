"""Packing recovered token sequences into a :class:`Reconstruction`, and the batch size an
attack reads from the release or the knowledge."""

from __future__ import annotations

from typing import Any

import torch

from trainleak.attacks.base import Reconstruction
from trainleak.errors import ConfigError
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.transformer_update import TransformerUpdate


def batch_size(release: TransformerUpdate, knowledge: Knowledge) -> int:
    """The number of sequences in the update: the release's, else the declared ``n_records``.

    Raises:
        ConfigError: when neither says.
    """
    batch = release.batch_size or knowledge.n_records
    if batch is None:
        raise ConfigError.invalid(
            "release.batch_size", "the batch size (or Knowledge(n_records=...))", None
        )
    return batch


def pack(
    seqs: list[list[int]], batch: int | None, width: int, pad: int, **diagnostics: Any
) -> Reconstruction:
    """Ids ``(m, width)`` padded with ``pad`` (``m = batch`` when known: missing rows are all
    padding), and ``diagnostics["lengths"]`` with each row's length (0 for a missing row)."""
    m = max(len(seqs), batch or 0, 1)
    ids = torch.full((m, width), pad, dtype=torch.long)
    lengths = []
    for i, s in enumerate(seqs[:m]):
        s = s[:width]
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        lengths.append(len(s))
    lengths += [0] * (m - len(lengths))
    return Reconstruction(ids, diagnostics={"lengths": tuple(lengths), **diagnostics})
