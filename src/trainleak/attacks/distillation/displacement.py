"""The metric of the nearest-synthetic membership attack, learned from the shadow bank.

A real-initialised synthetic image is its source record plus a displacement that the
distillation added. The adversary distilled its shadow sets itself, so it knows where each of
their images started (``ShadowSet.info["init_source"]``: indices into the auxiliary data) and
can measure the displacements ``s - x_source``. Under a Gaussian model of the displacement,
the log-likelihood that record ``x`` is the source of ``s`` is, up to a constant, minus the
Mahalanobis distance ``(s - x)^T S^-1 (s - x)`` with ``S`` the displacements' covariance:
directions in which distillation moves images a lot count less, directions it leaves alone
count more. Whitening every image by ``S^-1/2`` turns that distance into a Euclidean one, so
the attack's calibration works unchanged in the whitened space.

``S`` is the Ledoit-Wolf shrinkage estimate (analytic shrinkage toward a scaled identity,
no free parameter), pooled over every real-initialised shadow set: the attack does not need
the revealed algorithm or architecture. Nothing of the private data is used.

References:
    Ledoit and Wolf, "A well-conditioned estimator for large-dimensional covariance
    matrices", J. Multivariate Analysis 2004.
    Mahalanobis, "On the generalised distance in statistics", 1936.
"""

from __future__ import annotations

import torch
from sklearn.covariance import ledoit_wolf

from trainleak.attacks.distillation._common import tensor_hash
from trainleak.errors import ConfigError
from trainleak.releases.distilled import ShadowBank, ShadowSet

_WHITENER_CACHE: dict[str, torch.Tensor] = {}


def init_source(shadow: ShadowSet) -> torch.Tensor | None:
    """The auxiliary index each image of a shadow set started from, if its builder recorded
    them (``info["init_source"]``; real-initialised sets only)."""
    src = shadow.info.get("init_source")
    return src if isinstance(src, torch.Tensor) else None


def shadow_displacements(bank: ShadowBank, aux_x: torch.Tensor) -> torch.Tensor | None:
    """``(m, d)`` displacements ``s - x_source`` of every shadow image whose start is
    recorded; ``None`` when no shadow set records one.

    Raises:
        ConfigError: a recorded source outside the auxiliary data, or of the wrong length.
    """
    out = []
    for s in bank.sets:
        src = init_source(s)
        if src is None:
            continue
        n = len(s.release.images)
        if src.shape != (n,) or (n and (int(src.min()) < 0 or int(src.max()) >= len(aux_x))):
            raise ConfigError.invalid(
                "shadow_bank",
                f"init_source: {n} indices into the {len(aux_x)} auxiliary records",
                tuple(src.shape),
            )
        out.append(s.release.images.flatten(1).double() - aux_x[src].flatten(1).double())
    return torch.cat(out) if out else None


def displacement_whitener(bank: ShadowBank, aux_x: torch.Tensor) -> torch.Tensor | None:
    """``W = S^-1/2`` (``(d, d)``, float64) of the shadow displacements' Ledoit-Wolf
    covariance ``S``; ``None`` when the bank records no initialisation (memoised)."""
    sources = [init_source(s) for s in bank.sets]
    key = tensor_hash(aux_x, *(s.release.images for s in bank.sets)) + repr(
        [None if src is None else tensor_hash(src) for src in sources]
    )
    hit = _WHITENER_CACHE.get(key)
    if hit is not None:
        return hit
    disp = shadow_displacements(bank, aux_x)
    if disp is None or len(disp) < 2:
        return None
    cov = torch.from_numpy(ledoit_wolf(disp.numpy())[0])
    vals, vecs = torch.linalg.eigh(cov)
    w = vecs @ torch.diag(vals.clamp_min(1e-12 * float(vals.max())).rsqrt()) @ vecs.T
    if len(_WHITENER_CACHE) >= 64:
        _WHITENER_CACHE.clear()
    _WHITENER_CACHE[key] = w
    return w
