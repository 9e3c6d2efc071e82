"""The analyst's alignment of Data Collaboration uploads (seed system 7).

Every method centres each participant's anchor upload by its own mean (which removes the
secret translation together with the anchor mean) and finds per-participant maps ``G_i`` such
that the centred anchors ``A~_i^c G_i`` agree:

- ``"imakura"``: ``Z`` = top ``m_hat`` left singular vectors of ``[A~_1^c, ..., A~_c^c]``,
  ``G_i = pinv(A~_i^c) Z`` (Imakura & Sakurai, arXiv 1902.07535).
- ``"odc"``: orthonormal alignment to participant 0, ``G_i = polar(A~_i^cT A~_0^c)``
  (Nosaka et al., arXiv 2403.02780).
- ``"gopp_spectral"``: the spectral estimator of the generalised orthogonal Procrustes problem:
  the top-``m`` eigenvectors ``V`` of ``C = [A~_i^cT A~_j^c]_ij``, ``G_i = polar(V_i)``, then
  optional generalised power iterations ``G_i <- polar(sum_j C_ij G_j)`` (Ling, arXiv
  2106.15493; Bandeira, Khoo & Singer 2014).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from trainleak.errors import ConfigError
from trainleak.linalg import polar
from trainleak.releases.collaboration import SharedRepresentations
from trainleak.validation import check_choice

AlignMethod = Literal["imakura", "odc", "gopp_spectral"]


@dataclass(frozen=True)
class Alignment:
    """The analyst's maps and the collaborative representation.

    Attributes:
        maps: ``G_i`` per participant (m x m_hat).
        offsets: the anchor mean of each participant's upload (subtracted before ``G_i``).
        aligned: ``(X~_i - 1 offset_i^T) G_i`` per participant.
    """

    maps: tuple[np.ndarray, ...]
    offsets: tuple[np.ndarray, ...]
    aligned: tuple[np.ndarray, ...]


def align(
    release: SharedRepresentations,
    method: AlignMethod = "gopp_spectral",
    *,
    power_iters: int = 0,
    dim: int | None = None,
) -> Alignment:
    """Align every participant's upload into one collaborative representation.

    Args:
        release: the uploads.
        method: ``"imakura"``, ``"odc"`` or ``"gopp_spectral"``.
        power_iters: generalised power iterations after the spectral start (``gopp_spectral``).
        dim: ``m_hat`` for ``imakura`` (default ``m``).

    Returns:
        The :class:`Alignment`.

    Raises:
        ConfigError: unknown method, negative iterations or a bad ``dim``.
    """
    check_choice("method", method, AlignMethod)
    if power_iters < 0:
        raise ConfigError.invalid("power_iters", "an integer >= 0", power_iters)
    m = release.dim
    if dim is not None and not 1 <= dim <= m:
        raise ConfigError.invalid("dim", f"an integer in [1, {m}]", dim)
    anchors = [u.anchor.numpy() for u in release.uploads]
    offsets = [a.mean(0) for a in anchors]
    centred = [a - o for a, o in zip(anchors, offsets)]
    if method == "imakura":
        U, _, _ = np.linalg.svd(np.concatenate(centred, axis=1), full_matrices=False)
        Z = U[:, : dim or m]
        maps = [np.linalg.pinv(a) @ Z for a in centred]
    elif method == "odc":
        maps = [polar(a.T @ centred[0]) for a in centred]
    else:
        maps = _gopp(centred, power_iters)
    aligned = [(u.private.numpy() - o) @ G for u, o, G in zip(release.uploads, offsets, maps)]
    return Alignment(tuple(maps), tuple(offsets), tuple(aligned))


def _gopp(centred: list[np.ndarray], power_iters: int) -> list[np.ndarray]:
    m, c = centred[0].shape[1], len(centred)
    stacked = np.concatenate(centred, axis=1)
    C = stacked.T @ stacked
    _, vecs = np.linalg.eigh(C)
    V = vecs[:, -m:]
    maps = [polar(V[i * m : (i + 1) * m]) for i in range(c)]
    for _ in range(power_iters):
        maps = [
            polar(sum(C[i * m : (i + 1) * m, j * m : (j + 1) * m] @ maps[j] for j in range(c)))
            for i in range(c)
        ]
    return maps
