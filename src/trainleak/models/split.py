"""Split learning architectures: a model as a sequence of blocks, cut into head, body, tail.

A :class:`SplitSpec` names a model (a :class:`ModelSpec` whose module exposes its layers as
``blocks``, an ``nn.Sequential``) and two cut points. In U-shaped split learning the client
runs the head ``blocks[:head_end]`` and the tail ``blocks[tail_start:]`` (so the labels never
leave it) and the server runs the body ``blocks[head_end:tail_start]``. A three-way split of a
language model (client bottom, server trunk, client top) is the same object over a model whose
blocks are an embedding, transformer blocks and an output layer.

References:
    Vepakomma, Gupta, Swedish and Raskar, "Split learning for health: Distributed deep learning
    without sharing raw patient data", arXiv 1812.00564, 2018 (U-shaped configuration).
    Thapa, Chamikara, Camtepe and Sun, "SplitFed: When Federated Learning Meets Split
    Learning", AAAI 2022.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.registry import build_model, register_model
from trainleak.models.spec import ModelSpec, StateDict


class SplitConvNet(nn.Module):
    """Blocks: one ``conv(3x3, stride) + ReLU`` per entry of ``channels``, one
    ``[flatten] + linear + ReLU`` per entry of ``hidden``, then a linear output block.

    The default U-shaped cut puts the convolutions in the head, the dense layers in the body
    and the output layer in the tail (seed 15's CPU model: head Conv(1->8, 3, pad 1) + ReLU,
    body Linear(512->128) + ReLU, tail Linear(128->10) on 8x8 digits).

    Args:
        input_shape: ``(C, H, W)``.
        out_dim: number of classes.
        channels: output channels of each convolution (at least one).
        hidden: widths of the dense blocks.
        stride: stride of every convolution.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        out_dim: int,
        channels: Sequence[int] = (8,),
        hidden: Sequence[int] = (128,),
        stride: int = 1,
    ) -> None:
        super().__init__()
        if len(input_shape) != 3 or not channels or int(stride) < 1:
            raise ConfigError.invalid(
                "split_convnet", "input_shape (C, H, W), >= 1 channel entry, stride >= 1",
                (tuple(input_shape), tuple(channels), stride),
            )
        c, h, w = (int(s) for s in input_shape)
        blocks: list[nn.Module] = []
        for ch in channels:
            blocks.append(nn.Sequential(nn.Conv2d(c, int(ch), 3, stride, padding=1), nn.ReLU()))
            c, h, w = int(ch), (h - 1) // stride + 1, (w - 1) // stride + 1
        d = c * h * w
        for i, width in enumerate(hidden):
            dense: list[nn.Module] = [nn.Flatten()] if i == 0 else []
            blocks.append(nn.Sequential(*dense, nn.Linear(d, int(width)), nn.ReLU()))
            d = int(width)
        out: list[nn.Module] = [] if hidden else [nn.Flatten()]
        blocks.append(nn.Sequential(*out, nn.Linear(d, int(out_dim))))
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)  # type: ignore[no-any-return]


register_model("split_convnet", SplitConvNet)


@dataclass(frozen=True)
class SplitSpec:
    """A model and where it is cut.

    Attributes:
        model: the whole model's spec; its module must expose ``blocks`` (``nn.Sequential``).
        head_end: the head is ``blocks[:head_end]`` (client side, sends the smashed data).
        tail_start: the body is ``blocks[head_end:tail_start]`` (server side), the tail
            ``blocks[tail_start:]`` (client side, holds the labels).
        input_shape: shape of one input (``(C, H, W)`` images, ``(L,)`` token ids).
        input_dtype: ``"float32"`` (images) or ``"int64"`` (token ids).

    Raises:
        ConfigError: cut points outside ``1 <= head_end < tail_start < depth`` (checked by
            :func:`split_modules`, which knows the depth), or an unknown dtype.
    """

    model: ModelSpec
    head_end: int
    tail_start: int
    input_shape: tuple[int, ...]
    input_dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.input_dtype not in ("float32", "int64"):
            raise ConfigError.invalid("input_dtype", "'float32' or 'int64'", self.input_dtype)
        if not 1 <= int(self.head_end) < int(self.tail_start):
            raise ConfigError.invalid(
                "split", "cut points 1 <= head_end < tail_start (a non-empty head and body)",
                (self.head_end, self.tail_start),
            )

    def probe(self, n: int = 2) -> torch.Tensor:
        """An all-zero batch of ``n`` inputs of the declared shape and dtype."""
        dtype = torch.int64 if self.input_dtype == "int64" else torch.float32
        return torch.zeros((n, *self.input_shape), dtype=dtype)


@dataclass
class SplitModules:
    """The three parts of a split model (views of one module's blocks)."""

    head: nn.Sequential
    body: nn.Sequential
    tail: nn.Sequential


def model_depth(spec: ModelSpec) -> int:
    """The number of blocks of ``spec``'s model (it must expose ``blocks``)."""
    return len(_blocks(build_model(spec, seed=0), spec))


def _blocks(model: nn.Module, spec: ModelSpec) -> nn.Sequential:
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.Sequential):
        raise ConfigError.invalid(
            "split.model", "a model exposing its layers as an nn.Sequential 'blocks'", spec.kind
        )
    return blocks


def split_modules(
    split: SplitSpec,
    *,
    seed: int = 0,
    head: StateDict | None = None,
    body: StateDict | None = None,
    tail: StateDict | None = None,
) -> SplitModules:
    """Build the model of ``split`` (initialised from ``seed``) and cut it; load any states given.

    Raises:
        ConfigError: a cut point beyond the model's depth (``tail_start`` must leave a
            non-empty tail), or a model without ``blocks``.
    """
    blocks = _blocks(build_model(split.model, seed=seed), split.model)
    depth = len(blocks)
    if split.tail_start >= depth:
        raise ConfigError.invalid(
            "split.tail_start",
            f"a cut point below the model's depth {depth} (the tail must keep a block)",
            split.tail_start,
        )
    parts = SplitModules(
        nn.Sequential(*blocks[: split.head_end]),
        nn.Sequential(*blocks[split.head_end : split.tail_start]),
        nn.Sequential(*blocks[split.tail_start :]),
    )
    for module, state in ((parts.head, head), (parts.body, body), (parts.tail, tail)):
        if state is not None:
            module.load_state_dict(state)
    return parts


def part_shapes(split: SplitSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes of one smashed record (head output) and one body output."""
    parts = split_modules(split)
    with torch.no_grad():
        s = parts.head(split.probe())
        o = parts.body(s)
    return tuple(int(v) for v in s.shape[1:]), tuple(int(v) for v in o.shape[1:])
