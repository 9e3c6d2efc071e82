"""Whether a model fits in memory, decided before a single weight is allocated.

:func:`parameter_count` builds the architecture on PyTorch's ``meta`` device (shapes only, no
storage), so a spec with absurd widths is measured in microseconds. :func:`check_fits` compares
what the model needs at the least (float64 weights plus their gradients: 16 bytes a
parameter, as the attacks and training loops run) with the memory available now, and refuses a
model that cannot fit with a :class:`~trainleak.errors.ConfigError` instead of an allocation
failure deep inside PyTorch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainleak.errors import ConfigError

BYTES_PER_PARAMETER = 16
"""float64 weights and their gradients: the least any training or attack run holds."""


def parameter_count(builder: Callable[..., nn.Module], kwargs: dict[str, Any]) -> int | None:
    """Parameters of ``builder(**kwargs)``, built on the ``meta`` device; None if the builder
    cannot run there (it then gets no estimate)."""
    try:
        with torch.device("meta"):
            model = builder(**kwargs)
    except (ConfigError, TypeError):
        raise
    except Exception:  # a builder that needs real data to construct: no estimate
        return None
    return sum(p.numel() for p in model.parameters())


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation now (Linux ``MemAvailable``, else the
    free physical pages), or None when the platform does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


def check_fits(kind: str, kwargs: dict[str, Any], count: int | None) -> None:
    """Raise :class:`ConfigError` when ``count`` parameters cannot fit in available memory.

    Args:
        kind: the architecture's name, for the message.
        kwargs: its keywords, for the message.
        count: its parameter count (None: unknown, nothing is checked).
    """
    free = available_memory()
    if count is None or free is None:
        return
    need = count * BYTES_PER_PARAMETER
    if need > free:
        raise ConfigError(
            f"model {kind!r} with {kwargs} has {count:,} parameters and needs at least "
            f"{_gib(need)} (float64 weights and gradients), more than the {_gib(free)} of "
            "memory available; choose smaller widths"
        )
