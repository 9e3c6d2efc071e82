"""Bag-of-words baseline: which tokens occur, read off the input-embedding gradient.

Only the rows of the embedding table that the batch uses receive an input-side gradient, so
the ``B * n`` rows of largest gradient norm name the batch's tokens (exactly the used rows for
an untied encoder; with tied input/output embeddings every row gets an output-side gradient and
the ranking is a heuristic). Rows below ``relative_floor`` of the largest norm are left
out. The tokens are returned as one row per sequence slot, the set split evenly, which is
what ROUGE-1 can credit and no more: there is no order.

References:
    Lu et al., *APRIL* / Fowl et al., *Decepticons*, 2022 (token leakage from embedding
    gradients); Balunovic et al., *LAMP*, NeurIPS 2022, Sec. 4 (embedding-gradient token sets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.transformer._output import pack
from trainleak.errors import ConfigError
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.transformer_update import TransformerUpdate
from trainleak.validation import param


def _embedding_name(release: TransformerUpdate) -> str:
    table = release.model.module.get_input_embeddings()  # type: ignore[operator]
    for name, p in release.model.module.named_parameters():
        if p is table.weight:  # type: ignore[union-attr]
            return name
    raise ConfigError("the model's input embedding table is not one of its parameters")


@register_attack
@dataclass(frozen=True, kw_only=True)
class BagOfWords(Attack[TransformerUpdate]):
    """The ``B * n`` tokens whose embedding rows have the largest gradient norm.

    Args:
        relative_floor: rows whose gradient norm is below this fraction of the largest are
            not counted as used.
    """

    name: ClassVar[str] = "bag-of-words"
    summary: ClassVar[str] = "token set from the embedding-layer gradient (no order)"
    release_type: ClassVar[type[TransformerUpdate]] = TransformerUpdate

    relative_floor: float = param(1e-9, gt=0, lt=1)

    def run(
        self,
        release: TransformerUpdate,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        key = _embedding_name(release)
        if key not in release.update:
            raise ConfigError(f"the update has no gradient for the embedding table {key!r}")
        batch = release.batch_size or knowledge.n_records or 1
        n = release.max_length
        norms = release.update[key].double().norm(dim=1)[: len(release.model.tokenizer)]
        order = norms.topk(min(batch * n, norms.numel())).indices.tolist()
        floor = self.relative_floor * norms.max()
        top = [i for i in order if norms[i] > floor]
        rows = [top[b::batch][:n] for b in range(batch)]
        pad = release.model.tokenizer.pad_token_id
        return pack(rows, batch, n, int(pad if pad is not None else 0), tokens=len(top))

    def expected_shape(
        self, release: TransformerUpdate, knowledge: Knowledge
    ) -> tuple[int, ...] | None:
        return (release.max_length,)
