"""A restricted unpickler that can rebuild numpy arrays and nothing else.

The python release of CIFAR-10 is a set of pickles. A pickle can call any importable
function while it loads, so a plain ``pickle.load`` of a file a user hands us would run
whatever code the file names. This unpickler resolves only the handful of numpy globals that
rebuild arrays and refuses every other global with :class:`UnsafeFileError` before anything
is called.
"""

from __future__ import annotations

import codecs
import pickle
from pathlib import Path
from typing import IO, Any

import numpy as np

try:
    from numpy._core import multiarray, numeric
except ImportError:  # numpy < 2
    from numpy.core import multiarray, numeric  # type: ignore[no-redef]

from trainleak.errors import UnsafeFileError


def _latin1_encode(obj: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for ``bytes``, limited to latin-1."""
    if encoding.lower().replace("-", "").replace("_", "") not in {"latin1", "iso88591"}:
        raise UnsafeFileError(f"pickle asks for codec {encoding!r}; only latin-1 is allowed")
    return codecs.encode(obj, "latin-1", errors)


_ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): multiarray._reconstruct,
    # protocol-5 pickles of arrays; private and untyped in numpy's stubs
    ("numpy.core.numeric", "_frombuffer"): numeric._frombuffer,  # type: ignore[attr-defined]
    ("numpy._core.numeric", "_frombuffer"): numeric._frombuffer,  # type: ignore[attr-defined]
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_encode,
}


class NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickle plain containers and numpy arrays; refuse every other global.

    Args:
        file: a binary file object.
        source: the file's name, quoted in errors.
    """

    def __init__(self, file: IO[bytes], source: str) -> None:
        super().__init__(file, encoding="bytes")
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        """Return an allowed numpy global, or raise :class:`UnsafeFileError`."""
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafeFileError(
                f"refusing to load {self._source!r}: the pickle references {module}.{name}, "
                "and trainleak only unpickles plain containers and numpy arrays"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        """Refuse persistent ids (they would need an external object table)."""
        raise UnsafeFileError(f"refusing to load {self._source!r}: it uses persistent ids")


def safe_load(path: Path) -> Any:
    """Load a pickle file that may contain only containers, scalars and numpy arrays.

    Raises:
        UnsafeFileError: if the pickle references anything else.
        pickle.UnpicklingError, EOFError, ValueError, TypeError: if the file is malformed.
    """
    with path.open("rb") as f:
        return NumpyOnlyUnpickler(f, str(path)).load()
