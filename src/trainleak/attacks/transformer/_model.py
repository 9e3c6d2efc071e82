"""Model access shared by the transformer attacks: the token-wise layers of each block, their
gradients in input orientation, and the inputs those layers see for candidate sequences.

The "layer ``l``" of the span tests is the query/key/value projection of block ``l - 1``; its
input is the block's (normalised) hidden state: ``LN(E + P + S)`` for BERT's first block,
``ln_1(E + P)`` for GPT-2's, ``RMSNorm(E)`` for LLaMA-style blocks (Petrov et al., *DAGER*,
NeurIPS 2024, Sec. 3-4). A forward hook captures those inputs and stops the forward pass after
the deepest requested block, so a test costs only the blocks below it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from trainleak.errors import ConfigError
from trainleak.releases.transformer_update import TransformerUpdate

_PATTERNS = (
    re.compile(r"(^|\.)layer\.(\d+)\.attention\.self\.(query|key|value)$"),  # BERT
    re.compile(r"(^|\.)h\.(\d+)\.attn\.c_attn$"),  # GPT-2 (Conv1D, weight (in, out))
    re.compile(r"(^|\.)layers\.(\d+)\.self_attn\.(q_proj|k_proj|v_proj)$"),  # LLaMA
)


@dataclass(frozen=True)
class TokenLayer:
    """The token-wise projections of one block: module names, and whether weights are (in, out)."""

    block: int
    names: tuple[str, ...]
    transposed: bool


def token_layer(module: torch.nn.Module, block: int) -> TokenLayer:
    """The Q/K/V projections of ``block``.

    Raises:
        ConfigError: the architecture is not BERT-, GPT-2- or LLaMA-like, or has no such block.
    """
    names: list[str] = []
    transposed = False
    for name, _ in module.named_modules():
        for i, pat in enumerate(_PATTERNS):
            m = pat.search(name)
            if m and int(m.group(2)) == block:
                names.append(name)
                transposed = i == 1
    if not names:
        raise ConfigError(
            f"no query/key/value projection found in block {block} of "
            f"{type(module).__name__} (BERT, GPT-2 and LLaMA-style blocks are supported)"
        )
    return TokenLayer(block, tuple(names), transposed)


def layer_gradient(release: TransformerUpdate, layer: TokenLayer) -> torch.Tensor:
    """The layer's weight gradients stacked as ``(rows, d)`` float64 (rows = output units).

    Raises:
        ConfigError: the release has no gradient for one of the layer's weights.
    """
    parts = []
    for name in layer.names:
        key = f"{name}.weight"
        if key not in release.update:
            raise ConfigError(f"the update has no gradient for {key!r}, which the attack needs")
        g = release.update[key].detach().double()
        parts.append(g.T if layer.transposed else g)
    return torch.cat(parts, 0)


class _StopForwardError(Exception):
    pass


def layer_inputs(
    module: torch.nn.Module,
    layers: tuple[TokenLayer, ...],
    *,
    input_ids: torch.Tensor | None = None,
    inputs_embeds: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """Inputs ``(batch, L, d)`` of each layer's first projection, in the order of ``layers``.

    The forward pass stops after the deepest block is reached.
    """
    wanted = {layer.names[0]: i for i, layer in enumerate(layers)}
    deepest = max(layers, key=lambda lay: lay.block).names[0]
    got: dict[int, torch.Tensor] = {}
    handles = []
    mods = dict(module.named_modules())

    def make_hook(name: str):  # type: ignore[no-untyped-def]
        def hook(_m, args):  # type: ignore[no-untyped-def]
            got[wanted[name]] = args[0]
            if name == deepest:
                raise _StopForwardError

        return hook

    for name in wanted:
        handles.append(mods[name].register_forward_pre_hook(make_hook(name)))
    kwargs: dict[str, torch.Tensor] = {}
    if attention_mask is not None:
        kwargs["attention_mask"] = attention_mask
    if position_ids is not None:
        kwargs["position_ids"] = position_ids
    try:
        module(input_ids=input_ids, inputs_embeds=inputs_embeds, **kwargs)
    except _StopForwardError:
        pass
    finally:
        for h in handles:
            h.remove()
    return [got[i] for i in range(len(layers))]


def vocabulary_inputs(
    module: torch.nn.Module, layer: TokenLayer, position: int, vocab: int, chunk: int = 4096
) -> torch.Tensor:
    """First-layer inputs ``(vocab, d)`` of every token id placed at ``position``."""
    device = next(module.parameters()).device
    out = []
    for start in range(0, vocab, chunk):
        ids = torch.arange(start, min(start + chunk, vocab), device=device)[:, None]
        pos = torch.full_like(ids, position)
        mask = torch.ones_like(ids)
        z = layer_inputs(module, (layer,), input_ids=ids, attention_mask=mask, position_ids=pos)
        out.append(z[0][:, 0])
    return torch.cat(out, 0)
