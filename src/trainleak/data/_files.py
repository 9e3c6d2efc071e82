"""Finding data files, and the errors that say what is missing or broken."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from trainleak.errors import ConfigError, DataNotFoundError

ENV_VAR = "TRAINLEAK_DATA"
_HOW = f"pass data_dir=... or set {ENV_VAR}=... to the folder that holds it"


class CorruptDataError(DataNotFoundError):
    """A data file exists but cannot be read: truncated, wrong format or wrong size."""


def resolve_data_dir(data_dir: str | Path | None) -> Path:
    """Return the data root: ``data_dir`` if given, else the ``TRAINLEAK_DATA`` variable.

    Args:
        data_dir: an explicit folder, or ``None`` to use ``$TRAINLEAK_DATA``.

    Returns:
        The folder, with ``~`` expanded.

    Raises:
        DataNotFoundError: if neither is set, or the folder does not exist.
    """
    if data_dir is None:
        env = os.environ.get(ENV_VAR, "").strip()
        if not env:
            raise DataNotFoundError(
                f"no data folder given: pass data_dir=... or set {ENV_VAR}=... to a folder "
                "holding mnist/, cifar10/, att_faces/ or text/ (trainleak never downloads; "
                "load_digits() needs no data folder)"
            )
        root, source = Path(env).expanduser(), f"${ENV_VAR}"
    else:
        root, source = Path(data_dir).expanduser(), "data_dir"
    if not root.is_dir():
        raise DataNotFoundError(f"data folder {str(root)!r} (from {source}) does not exist; {_HOW}")
    return root


def find_file(root: Path, subdir: str, names: Sequence[str]) -> Path:
    """Return the first of ``names`` found in ``root/subdir`` (or directly in ``root``).

    Raises:
        DataNotFoundError: naming the file, the folders searched and how to supply them.
    """
    folders = [root / subdir, root]
    for folder in folders:
        for name in names:
            if (folder / name).is_file():
                return folder / name
    raise missing_error(names[0], folders)


def missing_error(name: str, folders: Sequence[Path]) -> DataNotFoundError:
    """Build the standard "file not found" error."""
    where = " or ".join(repr(str(f)) for f in folders)
    return DataNotFoundError(f"data file {name!r} not found in {where}; {_HOW}")


def corrupt_error(path: Path, problem: str) -> CorruptDataError:
    """Build the standard "file is corrupt" error."""
    return CorruptDataError(f"data file {str(path)!r} is corrupt: {problem}")


def check_limit(limit: int | None) -> None:
    """Raise :class:`ConfigError` unless ``limit`` is ``None`` or a positive integer."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError.invalid("limit", "None or a positive integer", limit)
