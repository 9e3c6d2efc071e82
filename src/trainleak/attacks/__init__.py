"""Attacks, one sub-package per release surface; every attack registers itself.

Use :func:`available_attacks` for the registry and :func:`get_attack` to build one by name.
"""

from __future__ import annotations

import sys
from typing import Any

from trainleak._discovery import import_submodules
from trainleak.attacks.base import (
    Attack,
    Reconstruction,
    register_attack,
    registered_attacks,
)
from trainleak.errors import ConfigError


def available_attacks() -> dict[str, type[Attack[Any]]]:
    """Every registered attack, by name (imports all attack modules first)."""
    import_submodules(sys.modules[__name__])
    return registered_attacks()


def get_attack(name: str, **params: Any) -> Attack[Any]:
    """Build the attack registered as ``name`` with hyper-parameters ``params``."""
    attacks = available_attacks()
    if name not in attacks:
        raise ConfigError.invalid("attack", f"one of {sorted(attacks)}", name)
    return attacks[name](**params)


__all__ = [
    "Attack",
    "Reconstruction",
    "available_attacks",
    "get_attack",
    "register_attack",
]
