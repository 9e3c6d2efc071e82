"""Data Collaboration participants: secret orthogonal transforms plus translations (seed 7).

References:
    Imakura & Sakurai, arXiv 1902.07535 (Data Collaboration analysis); Chen & Liu, geometric
    data perturbation ``G(X) = R X + Psi + Delta`` (ICDM 2005).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from trainleak.errors import ShapeError
from trainleak.linalg import haar_orthogonal
from trainleak.releases.collaboration import Disclosure, SharedRepresentations, Upload


@dataclass
class DCParty:
    """A participant with private rows and a secret ``(Q, t)``.

    Args:
        X: private rows (n x m).
        y: labels (n,).
        seed: seed of the secret transform.
        translate: whether to add a secret translation ``t ~ N(0, translation_scale^2 I)``.
        translation_scale: scale of ``t``.
    """

    X: np.ndarray
    y: np.ndarray
    seed: int
    translate: bool = True
    translation_scale: float = 1.0
    Q: np.ndarray = field(init=False, repr=False)
    t: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.X.ndim != 2 or self.y.shape != (self.X.shape[0],):
            raise ShapeError(
                f"DCParty expects X (n, m) and y (n,), received {self.X.shape}, {self.y.shape}"
            )
        rng = np.random.default_rng(self.seed)
        m = self.X.shape[1]
        self.Q = haar_orthogonal(m, rng)
        self.t = np.asarray(
            rng.standard_normal(m) * self.translation_scale if self.translate else np.zeros(m)
        )

    def transform(self, Z: np.ndarray) -> np.ndarray:
        """``Z Q + 1 t^T``."""
        return np.asarray(Z @ self.Q + self.t)

    def upload(self, anchor: np.ndarray) -> Upload:
        """The upload ``(X Q + 1 t^T, X_anc Q + 1 t^T, y)``."""
        if anchor.ndim != 2 or anchor.shape[1] != self.X.shape[1]:
            raise ShapeError(
                f"anchor must have shape (r, {self.X.shape[1]}), received {anchor.shape}"
            )
        return Upload(
            torch.from_numpy(self.transform(self.X)),
            torch.from_numpy(self.transform(anchor)),
            torch.from_numpy(self.y.astype(np.int64)),
        )

    def disclose(self, index: int, anchor: np.ndarray | None) -> Disclosure:
        """Everything this party tells a colluding analyst."""
        return Disclosure(
            index,
            torch.from_numpy(self.X),
            torch.from_numpy(self.Q),
            torch.from_numpy(self.t),
            None if anchor is None else torch.from_numpy(anchor),
        )


def collaborate(parties: list[DCParty], anchor: np.ndarray) -> SharedRepresentations:
    """Every party uploads; the analyst receives :class:`SharedRepresentations`."""
    return SharedRepresentations(tuple(p.upload(anchor) for p in parties))
