"""A causal language model split three ways: client bottom, server trunk, client top.

The bottom is the token (and position) embedding plus blocks ``[0, bottom_end)``; the trunk is
blocks ``[bottom_end, top_start)``; the top is blocks ``[top_start, n)``, the final norm and a
head (SplitLLM's layout, Chen et al. 2024, arXiv 2409.00960). Each part runs through the whole
transformers module with forward hooks that replace the output of the block before the cut and
stop after the block that ends the part, so attention masks, positions and rotary embeddings are
built by transformers itself (GPT-2 and Llama families alike), and a part never sees anything
but its declared input: the trunk runs on placeholder ids whose bottom output is overwritten.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.language import LanguageModel, blocks


@dataclass(frozen=True)
class LMSplit:
    """The cut points of a three-way split, in blocks.

    Attributes:
        bottom_end: blocks ``[0, bottom_end)`` run on the client before the cut (>= 1).
        top_start: blocks ``[top_start, n)`` run on the client after the trunk
            (``bottom_end < top_start <= n``; ``top_start == n`` leaves only the final norm).
    """

    bottom_end: int
    top_start: int

    def check(self, depth: int) -> None:
        """Refuse cut points that do not fit a model of ``depth`` blocks.

        Raises:
            ConfigError: naming the split and the depth.
        """
        ok = (
            isinstance(self.bottom_end, int)
            and isinstance(self.top_start, int)
            and 1 <= self.bottom_end < self.top_start <= depth
        )
        if not ok:
            raise ConfigError(
                f"split point beyond the model's depth: bottom_end={self.bottom_end}, "
                f"top_start={self.top_start}, but the model has {depth} blocks (need "
                f"1 <= bottom_end < top_start <= {depth})"
            )

    def to_json(self) -> dict[str, int]:
        return {"bottom_end": self.bottom_end, "top_start": self.top_start}


class _Stop(Exception):  # noqa: N818 - control flow, not an error
    """Raised inside a hook to end a forward pass after the part's last block."""

    def __init__(self, value: torch.Tensor) -> None:
        super().__init__("stop")
        self.value = value


@contextmanager
def _hooks(
    lm: LanguageModel, replace: tuple[int, torch.Tensor] | None, stop_after: int | None
) -> Iterator[None]:
    layer = blocks(lm)
    handles: list[Any] = []
    if replace is not None:
        at, value = replace

        def swap(_m: nn.Module, _i: Any, out: Any) -> Any:
            return (value, *out[1:]) if isinstance(out, tuple) else value

        handles.append(layer[at].register_forward_hook(swap))
    if stop_after is not None:

        def stop(_m: nn.Module, _i: Any, out: Any) -> Any:
            raise _Stop(out[0] if isinstance(out, tuple) else out)

        handles.append(layer[stop_after].register_forward_hook(stop))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


class SplitLM:
    """The three parts of ``lm`` as functions of token ids or hidden states.

    Args:
        lm: a causal language model (GPT-2 or Llama family).
        split: the cut points.

    Raises:
        ConfigError: a split point beyond the model's depth, or an encoder model.
    """

    def __init__(self, lm: LanguageModel, split: LMSplit) -> None:
        if lm.kind != "causal":
            raise ConfigError(f"a three-way split needs a causal model; {lm.name} is an encoder")
        split.check(len(blocks(lm)))
        self.lm = lm
        self.split = split
        self.width = int(lm.module.config.hidden_size)

    @property
    def depth(self) -> int:
        return len(blocks(self.lm))

    def _run(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        replace: tuple[int, torch.Tensor] | None,
        stop_after: int | None,
    ) -> torch.Tensor:
        with _hooks(self.lm, replace, stop_after):
            try:
                out = self.lm.module(
                    input_ids=ids, attention_mask=mask, output_hidden_states=stop_after is None
                )
            except _Stop as s:
                return s.value
        last: torch.Tensor = out.hidden_states[-1]
        return last

    def bottom(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(n, L, d)`` hidden states at the bottom/trunk cut."""
        return self._run(ids, mask, None, self.split.bottom_end - 1)

    def trunk(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(n, L, d)`` trunk output for hidden states received at the cut."""
        self.check_hidden(hidden, mask)
        dummy = torch.zeros_like(mask)
        return self._run(dummy, mask, (self.split.bottom_end - 1, hidden), self.split.top_start - 1)

    def top(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(n, L, d)`` final hidden states (after the final norm) from the trunk's output."""
        self.check_hidden(hidden, mask)
        dummy = torch.zeros_like(mask)
        return self._run(dummy, mask, (self.split.top_start - 1, hidden), None)

    def full(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Final hidden states of the unsplit model (the non-split reference)."""
        return self._run(ids, mask, None, None)

    def check_hidden(self, hidden: torch.Tensor, mask: torch.Tensor) -> None:
        """Refuse hidden states that do not fit the split or are not finite.

        Raises:
            ShapeError: a shape other than ``(n, L, d)`` matching ``mask``; ConfigError:
                NaN or inf.
        """
        want = (*mask.shape, self.width)
        if tuple(hidden.shape) != want:
            raise ShapeError(
                f"hidden states of shape {tuple(hidden.shape)} do not match the split "
                f"(expected {want}: the mask's (n, L) and the model width {self.width})"
            )
        if not bool(torch.isfinite(hidden).all()):
            raise ConfigError("non-finite hidden states (NaN or inf) at the split cut")

    def part_parameters(self, part: str) -> list[nn.Parameter]:
        """The parameters of ``"bottom"``, ``"trunk"`` or ``"top"`` (the top includes the final
        norm; tied input/output embeddings belong to the bottom)."""
        layer = blocks(self.lm)
        if part == "trunk":
            mods = layer[self.split.bottom_end : self.split.top_start]
            return [p for m in mods for p in m.parameters()]
        if part == "top":
            found = [p for m in layer[self.split.top_start :] for p in m.parameters()]
            return found + [p for p in _final_norm(self.lm).parameters()]
        if part == "bottom":
            mine = {id(p) for part_ in ("trunk", "top") for p in self.part_parameters(part_)}
            return [p for p in self.lm.module.parameters() if id(p) not in mine]
        raise ConfigError.invalid("part", "'bottom', 'trunk' or 'top'", part)

    def trunk_module_names(self) -> tuple[str, ...]:
        """Dotted names of the trunk's linear layers (LoRA targets restricted to the trunk)."""
        trunk = {
            id(m)
            for b in blocks(self.lm)[self.split.bottom_end : self.split.top_start]
            for m in b.modules()
        }
        names = [
            n
            for n, m in self.lm.module.named_modules()
            if id(m) in trunk and type(m).__name__ in ("Linear", "Conv1D")
        ]
        return tuple(names)


def seeded_init(module: nn.Module, gen: torch.Generator) -> nn.Module:
    """Re-initialise every ``nn.Linear`` of ``module`` from ``gen`` (weights
    ``N(0, 1 / fan_in)``, zero biases) without touching the global random state; returns it."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / m.in_features**0.5)
                if m.bias is not None:
                    m.bias.zero_()
    return module


def _final_norm(lm: LanguageModel) -> nn.Module:
    inner: Any = lm.module
    inner = getattr(inner, "get_base_model", lambda: inner)()
    base = getattr(inner, "transformer", None) or getattr(inner, "model", None)
    for name in ("ln_f", "norm"):
        norm = getattr(base, name, None)
        if isinstance(norm, nn.Module):
            return norm
    raise ConfigError(f"cannot find the final norm of {type(lm.module).__name__}")
