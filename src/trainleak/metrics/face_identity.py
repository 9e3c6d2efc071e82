"""The identity evaluator for faces: the offline dlib face-recognition ResNet (128-d
embeddings), optional extra ``faces``.

Each image (grey, in any value box) is rescaled to ``[0, 255]``, resized to 150 x 150 (no
alignment), copied to three channels and embedded. A reconstruction of class ``c`` counts as
identified when its nearest private image in embedding space belongs to ``c``;
``delta_face`` is its embedding distance to the nearest private image of ``c`` (Struppek et
al.'s delta_face, with dlib instead of FaceNet). Acc@5: the class is among the five whose
nearest private image is nearest. The interval resamples *classes*, not images: an attack's
images of one class come from one search and are often near-copies, so they are not
independent evidence (an image-level interval would be far too narrow). Forward only: nothing
here is differentiable, so no attack can optimise against it.

Measured on the ORL split of ``scenarios.inversion`` (``docs/decisions.md``, "Model
inversion, fourth pass"): held-out private faces (images 9-10) are identified 0.90 of the time
at 32 x 32 and 0.925 at 64 x 64 against images 1-8, but a Gaussian blur of 1 pixel (sigma) at
32 x 32 drops that to 0.55 and of 2 pixels to 0.175: the evaluator reads fine detail that a
blurry prior cannot draw.

References:
    King, "Dlib-ml: A Machine Learning Toolkit", JMLR 2009 (the face-recognition ResNet model
    is public domain).
    Struppek et al., "Plug & Play Attacks", ICML 2022 (delta_face).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from trainleak.errors import MissingExtraError, ShapeError, import_extra
from trainleak.metrics.intervals import class_bootstrap_interval

_MODEL_FILE = "models/dlib_face_recognition_resnet_model_v1.dat"
_SIDE = 150


@dataclass(frozen=True)
class IdentityScore:
    """The dlib evaluator's verdict.

    Attributes:
        accuracy: share of reconstructions whose nearest private image has their class.
        per_class: that share per class (NaN for a class without reconstructions).
        delta_face: mean embedding distance to the nearest private image of the class.
        acc5: share whose class is among the five classes with the nearest private images.
        interval: 95 % percentile-bootstrap interval of ``accuracy`` over classes.
        hits: the Acc@1 outcome of each reconstruction (1.0 or 0.0).
    """

    accuracy: float
    per_class: tuple[float, ...]
    delta_face: float
    acc5: float = float("nan")
    interval: tuple[float, float] = (float("nan"), float("nan"))
    hits: tuple[float, ...] = ()


def model_file() -> Path:
    """The dlib model file inside the installed ``face_recognition_models`` package, found
    without importing it (its ``__init__`` needs ``pkg_resources``, which new setuptools lacks).

    Raises:
        MissingExtraError: the package or its model file is missing.
    """
    try:
        spec = importlib.util.find_spec("face_recognition_models")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / _MODEL_FILE
        if path.is_file():
            return path
    raise MissingExtraError(
        "the dlib face-identity evaluator needs face_recognition_models (its model file "
        f"{_MODEL_FILE}), which is not installed: pip install 'trainleak[faces]'"
    )


class DlibEmbedder:
    """Embed grey images with dlib's face-recognition ResNet.

    Args:
        value_range: the box of the images it will be given.

    Raises:
        MissingExtraError: dlib or face_recognition_models is not installed.
    """

    def __init__(self, value_range: tuple[float, float] = (0.0, 1.0)) -> None:
        dlib = import_extra("dlib", "faces", "the dlib face-identity evaluator")
        self._net: Any = dlib.face_recognition_model_v1(str(model_file()))
        self.low, self.high = (float(v) for v in value_range)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """``(n, 128)`` float64 embeddings of ``(n, 1 or 3, H, W)`` images."""
        if images.ndim != 4 or images.shape[1] not in (1, 3):
            raise ShapeError(f"dlib embeds (n, 1 or 3, H, W) images, got {tuple(images.shape)}")
        x = ((images.float() - self.low) / (self.high - self.low)).clamp(0, 1)
        x = F.interpolate(x, size=(_SIDE, _SIDE), mode="bilinear", align_corners=False)
        x = x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x
        arr = (x.permute(0, 2, 3, 1).cpu().numpy() * 255).round().astype(np.uint8)
        out = [np.asarray(self._net.compute_face_descriptor(np.ascontiguousarray(a))) for a in arr]
        return torch.from_numpy(np.stack(out)).double()


def class_distances(d: torch.Tensor, ref_y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """``(n, num_classes)``: from the distances ``d`` (``(n, m)``) of ``n`` images to ``m``
    reference images labelled ``ref_y``, each image's distance to each class (its nearest
    reference image of that class; infinity for a class without one)."""
    return torch.stack(
        [
            d[:, ref_y == c].min(1).values
            if bool((ref_y == c).any())
            else torch.full((len(d),), float("inf"), dtype=d.dtype)
            for c in range(num_classes)
        ],
        1,
    )


def identity_score(
    embedder: DlibEmbedder,
    images: torch.Tensor,
    labels: torch.Tensor,
    private_embeddings: torch.Tensor,
    private_y: torch.Tensor,
    num_classes: int,
    *,
    seed: int = 0,
) -> IdentityScore:
    """Nearest-private-image identity accuracy (Acc@1, Acc@5, class-bootstrap interval) and
    delta_face of ``images``, given the embeddings of the private images
    (``embedder(private_x)``, computed once)."""
    if len(images) != len(labels) or not len(images):
        raise ShapeError(f"{len(images)} images for {len(labels)} labels (need >= 1)")
    e, ref = embedder(images), private_embeddings.cpu()
    labels, private_y = labels.cpu(), private_y.cpu()
    d = torch.cdist(e, ref)
    hit = (private_y[d.argmin(1)] == labels).double()
    same = private_y[None, :] == labels[:, None]
    delta = d.masked_fill(~same, float("inf")).min(1).values
    per_class_d = class_distances(d, private_y, num_classes)
    rank = (per_class_d < per_class_d.gather(1, labels[:, None])).sum(1)
    per = tuple(
        float(hit[labels == c].mean()) if bool((labels == c).any()) else float("nan")
        for c in range(num_classes)
    )
    return IdentityScore(
        float(hit.mean()),
        per,
        float(delta.mean()),
        float((rank < 5).double().mean()),
        class_bootstrap_interval(hit.numpy(), labels.numpy(), seed=seed),
        tuple(float(h) for h in hit),
    )
