"""Fingerprints of a released synthetic set: how each candidate architecture trains on it, and
statistics of the images themselves.

The premise of the information revelation attack is that a distilled set encodes the training
dynamics of the network it was distilled with, so the true architecture trains best on it, and
that each algorithm leaves its own marks on the images (gradient matching produces
high-frequency patterns, distribution matching stays close to its start, trajectory matching
publishes a learning rate). The features [inferred from the abstract, seed brief section 13]:

* ``"image"``: image statistics: pixel histogram, saturation at both ends of the range,
  radial power spectrum, total variation, spread within and across classes, distance of each
  image to its nearest auxiliary image (relative to the auxiliary data's own nearest-neighbour
  distance), distance of class means, and the published metadata (a learning rate or not,
  its value, soft labels or not);
* ``"objective"``: per candidate architecture, the set's residuals at gradient matching and
  distribution matching against the auxiliary data (:mod:`.objective`);
* ``"dynamics"`` (only with ``dynamics=True``): per candidate architecture, averaged over
  ``inits`` initialisations: the training-loss curve, the gradient-norm profile, the final
  loss and accuracy on the set, accuracy and loss on the auxiliary data, and the relative
  parameter change ||theta_E - theta_0|| / ||theta_0||. Off by default: on the digits default
  run (the last session's sets, leave-one-seed-out on the 36 shadow sets, four forest seeds)
  adding them lowered architecture accuracy from 0.97-1.00 to 0.81-0.89, and they were the
  costliest part of the fingerprint (the run's 60 sets: 124 s CPU with them, 72 s without).

Fingerprints are pure functions of (set, candidates, auxiliary data, settings), seeded by the
settings only, so they are memoised in-process by content hash.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from trainleak.attacks.distillation._common import spec_key, tensor_hash
from trainleak.attacks.distillation.objective import (
    FEATURES_PER_ARCHITECTURE,
    objective_residuals,
)
from trainleak.errors import ConfigError
from trainleak.models.fitting import accuracy, fit
from trainleak.models.registry import build_model
from trainleak.models.spec import ModelSpec
from trainleak.releases.distilled import DistilledSet, ShadowBank, ShadowSet
from trainleak.validation import check_fields, param

_CACHE: dict[str, np.ndarray] = {}
_CACHE_LIMIT = 20_000
IMAGE_FEATURES = 17
"""Image-group features besides the histogram's bins."""


@dataclass(frozen=True)
class FingerprintSpec:
    """Settings of a fingerprint.

    Args:
        steps: SGD steps of each candidate network on the set.
        lr: their learning rate (fixed, so fingerprints of different sets are comparable).
        inits: initialisations per candidate architecture.
        aux_eval: auxiliary images used for accuracy, loss and nearest-neighbour distances.
        hist_bins: bins of the pixel histogram.
        seed: seed of the initialisations and batch draws.
        dynamics: include the training-dynamics group.
        objective_inits: random networks per architecture in the objective residuals.
        objective_steps: SGD steps on the set before the second gradient residual.
    """

    steps: int = param(60, ge=2, integer=True)
    lr: float = param(0.05, gt=0)
    inits: int = param(3, ge=1, integer=True)
    aux_eval: int = param(500, ge=2, integer=True)
    hist_bins: int = param(8, ge=2, integer=True)
    seed: int = param(0, ge=0, integer=True)
    dynamics: bool = param(False, choices=(True, False))
    objective_inits: int = param(4, ge=1, integer=True)
    objective_steps: int = param(10, ge=0, integer=True)

    def __post_init__(self) -> None:
        check_fields(self)

    def log_points(self) -> tuple[int, ...]:
        """Steps at which loss and gradient norm are read."""
        s = self.steps
        return tuple(sorted({0, s // 8, s // 4, s // 2, s - 1}))


def _dynamics(
    release: DistilledSet,
    spec: ModelSpec,
    aux: tuple[torch.Tensor, torch.Tensor],
    fp: FingerprintSpec,
) -> list[float]:
    """Mean over initialisations of one architecture's training features on the set."""
    x, y = release.images.float(), release.labels
    log_k = math.log(release.num_classes)
    rows = []
    for i in range(fp.inits):
        net = build_model(spec, seed=fp.seed * 1000 + i)
        theta0 = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
        res = fit(
            net,
            x,
            y,
            steps=fp.steps,
            lr=fp.lr,
            generator=torch.Generator().manual_seed(fp.seed * 1000 + i),
            batch_size=256,
            weight_decay=0.0,
            log_at=fp.log_points(),
        )
        theta = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
        with torch.no_grad():
            aux_loss = float(F.cross_entropy(net(aux[0]), aux[1]))
        rows.append(
            [l / log_k for l in res.losses]
            + [math.log1p(g) for g in res.grad_norms]
            + [
                res.final_loss / log_k,
                accuracy(net, x, release.hard_labels),
                accuracy(net, *aux),
                aux_loss / log_k,
                float((theta - theta0).norm() / theta0.norm().clamp_min(1e-12)),
            ]
        )
    return np.asarray(rows, dtype=np.float64).mean(0).tolist()


def _spectrum(u: torch.Tensor, bins: int = 4) -> list[float]:
    """Share of the (mean-removed) power in ``bins`` radial frequency bands."""
    centred = u - u.mean(dim=(2, 3), keepdim=True)
    power = torch.fft.fft2(centred.double()).abs().pow(2).mean(dim=(0, 1))
    h, w = power.shape
    fy = torch.fft.fftfreq(h).abs().unsqueeze(1)
    fx = torch.fft.fftfreq(w).abs().unsqueeze(0)
    radius = (fy**2 + fx**2).sqrt() / math.sqrt(0.5)
    band = (radius * bins).long().clamp_max(bins - 1)
    total = float(power.sum()) + 1e-12
    return [float(power[band == b].sum()) / total for b in range(bins)]


def _image_stats(
    release: DistilledSet, aux: tuple[torch.Tensor, torch.Tensor], fp: FingerprintSpec
) -> list[float]:
    lo, hi = release.value_range
    u = ((release.images.float() - lo) / (hi - lo)).clamp(0, 1)
    ua = ((aux[0] - lo) / (hi - lo)).clamp(0, 1)
    hist = torch.histc(u, bins=fp.hist_bins, min=0.0, max=1.0) / u.numel()
    tv = (u[..., 1:, :] - u[..., :-1, :]).abs().mean() + (u[..., 1:] - u[..., :-1]).abs().mean()
    flat, aflat = u.flatten(1).double(), ua.flatten(1).double()
    d = math.sqrt(flat.shape[1])
    nn_syn = torch.cdist(flat, aflat).min(1).values / d
    aa = torch.cdist(aflat, aflat) + torch.eye(len(aflat), dtype=aflat.dtype) * 1e9
    nn_aux = float(aa.min(1).values.median()) / d + 1e-12
    labels = release.hard_labels
    k = release.num_classes
    means = torch.stack([_mean_or_zero(flat[labels == c], flat.shape[1]) for c in range(k)])
    amean = torch.stack([_mean_or_zero(aflat[aux[1] == c], flat.shape[1]) for c in range(k)])
    quant = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    lr = release.lr
    return (
        hist.tolist()
        + [float((u < 0.01).float().mean()), float((u > 0.99).float().mean()), float(tv)]
        + _spectrum(u)
        + [float(flat.std()), _within_class_spread(flat, labels, k), float(means.std(0).mean())]
        + [float(q) / nn_aux for q in torch.quantile(nn_syn, quant)]
        + [float((means - amean).norm(dim=1).mean()) / d]
        + [0.0 if lr is None else 1.0, 0.0 if lr is None else math.log(lr)]
        + [1.0 if release.soft else 0.0]
    )


def _within_class_spread(flat: torch.Tensor, labels: torch.Tensor, k: int) -> float:
    """Mean per-pixel standard deviation within classes (0 with one image per class)."""
    spreads = [flat[labels == c].std(0).mean() for c in range(k) if (labels == c).sum() > 1]
    return float(torch.stack(spreads).mean()) if spreads else 0.0


def _mean_or_zero(x: torch.Tensor, d: int) -> torch.Tensor:
    return x.mean(0) if len(x) else torch.zeros(d, dtype=torch.float64)


def aux_subset(
    aux: tuple[torch.Tensor, torch.Tensor], fp: FingerprintSpec
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``fp.aux_eval`` auxiliary records (a fixed, seed-free choice)."""
    return aux[0][: fp.aux_eval].float(), aux[1][: fp.aux_eval]


def feature_groups(n_archs: int, fp: FingerprintSpec) -> dict[str, slice]:
    """Where each feature group lies in a fingerprint of ``n_archs`` architectures."""
    image = IMAGE_FEATURES + fp.hist_bins
    obj = image + n_archs * FEATURES_PER_ARCHITECTURE
    out = {"image": slice(0, image), "objective": slice(image, obj)}
    if fp.dynamics:
        out["dynamics"] = slice(obj, obj + n_archs * (2 * len(fp.log_points()) + 5))
    return out


def fingerprint(
    release: DistilledSet,
    archs: Sequence[ModelSpec],
    aux: tuple[torch.Tensor, torch.Tensor],
    fp: FingerprintSpec,
    aux_key: str | None = None,
) -> np.ndarray:
    """The fingerprint vector of ``release`` (image statistics, each architecture's objective
    residuals, then, with ``fp.dynamics``, each architecture's training dynamics, in the order
    given; see :func:`feature_groups`); memoised by content hash."""
    sub = aux_subset(aux, fp)
    akey = aux_key if aux_key is not None else tensor_hash(*sub)
    key = f"{release.content_hash()}|{spec_key(archs)}|{akey}|{fp!r}"
    hit = _CACHE.get(key)
    if hit is not None:
        return hit.copy()
    feats = _image_stats(release, sub, fp)
    for spec in archs:
        feats += objective_residuals(
            release,
            spec,
            sub,
            inits=fp.objective_inits,
            steps=fp.objective_steps,
            lr=fp.lr,
            seed=fp.seed,
        )
    if fp.dynamics:
        for spec in archs:
            feats += _dynamics(release, spec, sub, fp)
    out = np.nan_to_num(np.asarray(feats, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = out
    return out.copy()


def fingerprints(
    releases: Sequence[DistilledSet],
    archs: Sequence[ModelSpec],
    aux: tuple[torch.Tensor, torch.Tensor],
    fp: FingerprintSpec,
) -> np.ndarray:
    """Fingerprints of many sets, ``(n, d)``, sharing one auxiliary hash."""
    akey = tensor_hash(*aux_subset(aux, fp))
    return np.stack([fingerprint(r, archs, aux, fp, akey) for r in releases])


def source_of(shadow: ShadowSet) -> torch.Tensor | None:
    """The auxiliary indices a shadow set was distilled from, if its builder recorded them
    (``info["aux_source"]``)."""
    src = shadow.info.get("aux_source")
    return src if isinstance(src, torch.Tensor) else None


def bank_fingerprints(
    bank: ShadowBank,
    archs: Sequence[ModelSpec],
    aux: tuple[torch.Tensor, torch.Tensor],
    fp: FingerprintSpec,
) -> tuple[np.ndarray, FingerprintSpec]:
    """Fingerprints of the shadow sets, each against auxiliary records it was not distilled
    from, and the settings to fingerprint a release with.

    A release was distilled from data the adversary never saw, so its nearest-auxiliary
    distances and its residuals against the auxiliary data are those of unseen data; a shadow
    set measured against the very records it started from would look closer to the auxiliary
    data than any release (on the digits default run the residuals of real-initialised
    shadow sets were about half those of the targets). So each shadow set is measured
    against the auxiliary records outside its source (where the builder recorded it), and
    every set, the release included, against the same number of records: ``aux_eval``
    capped by the smallest complement. [inferred] ours.
    """
    n = len(aux[0])
    keep = []
    for s in bank.sets:
        mask = torch.ones(n, dtype=torch.bool)
        src = source_of(s)
        if src is not None:
            mask[src[(src >= 0) & (src < n)]] = False
        keep.append(mask)
    size = min([fp.aux_eval, *(int(m.sum()) for m in keep)])
    if size < 2:
        raise ConfigError.invalid(
            "shadow_bank", "shadow sets leaving at least two auxiliary records unused", size
        )
    used = dataclasses.replace(fp, aux_eval=size)
    feats = [
        fingerprint(s.release, archs, (aux[0][m], aux[1][m]), used) for s, m in zip(bank.sets, keep)
    ]
    return np.stack(feats), used
