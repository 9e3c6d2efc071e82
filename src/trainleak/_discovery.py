"""Import every module of a sub-package so that its registration decorators run.

A module that needs an optional extra which is not installed raises
:class:`~trainleak.errors.MissingExtraError` on import (via ``import_extra`` at its top) and is
skipped: its attacks or experiments are then simply not registered.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from trainleak.errors import MissingExtraError


def import_submodules(package: ModuleType) -> None:
    """Import all modules below ``package`` (used by the attack and experiment registries)."""
    for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            importlib.import_module(info.name)
        except MissingExtraError:
            continue  # a surface whose optional extra is absent (e.g. language models)


def optional_module(name: str) -> tuple[ModuleType | None, str]:
    """``(module, "")``, or ``(None, why)`` when it needs an optional extra that is absent: for
    a release surface that only some installations have (a language model needs ``text``)."""
    try:
        return importlib.import_module(name), ""
    except MissingExtraError as exc:
        return None, str(exc)
