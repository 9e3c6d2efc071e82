"""The ORL / AT&T faces: 40 identities x 10 greyscale PGM images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from trainleak.data._files import corrupt_error, missing_error, resolve_data_dir
from trainleak.data._types import ImageDataset

N_SUBJECTS, N_PER_SUBJECT = 40, 10
_WIDTH, _HEIGHT = 92, 112


def _read_pgm(path: Path) -> np.ndarray:
    try:
        with Image.open(path) as im:
            im.load()
            mode, size, arr = im.mode, im.size, np.asarray(im)
    except (OSError, SyntaxError, ValueError) as exc:
        raise corrupt_error(path, f"not a readable PGM image ({exc})") from exc
    if mode != "L" or size != (_WIDTH, _HEIGHT):
        raise corrupt_error(path, f"{mode} image of size {size}, expected 8-bit grey 92 x 112")
    return arr


def load_orl_faces(data_dir: str | Path | None = None) -> ImageDataset:
    """Load the ORL faces from ``<data_dir>/att_faces/s{1..40}/{1..10}.pgm``.

    Args:
        data_dir: the data root (or the ``att_faces`` folder itself); ``None`` reads
            ``$TRAINLEAK_DATA``.

    Returns:
        ``ImageDataset`` named ``"orl"``: 400 images of shape ``(1, 112, 92)`` in ``[0, 1]``,
        ordered by subject then image number; ``y`` is the identity ``0 .. 39`` (folder
        ``s{y+1}``) and ``classes`` are the folder names ``"s1" .. "s40"``.

    Raises:
        DataNotFoundError: if an image is missing; ``CorruptDataError`` if one is damaged.

    References:
        Samaria, Harter, "Parameterisation of a stochastic model for human face
        identification", IEEE WACV 1994. These are photographs of real people: research use.
    """
    root = resolve_data_dir(data_dir)
    folder = root / "att_faces" if (root / "att_faces").is_dir() else root
    images, labels = [], []
    for subject in range(1, N_SUBJECTS + 1):
        for i in range(1, N_PER_SUBJECT + 1):
            path = folder / f"s{subject}" / f"{i}.pgm"
            if not path.is_file():
                raise missing_error(f"s{subject}/{i}.pgm", [folder])
            images.append(_read_pgm(path))
            labels.append(subject - 1)
    x = torch.from_numpy(np.stack(images).astype(np.float32)).div_(255.0).unsqueeze(1)
    y = torch.tensor(labels, dtype=torch.int64)
    classes = tuple(f"s{s}" for s in range(1, N_SUBJECTS + 1))
    return ImageDataset("orl", x, y, classes)
