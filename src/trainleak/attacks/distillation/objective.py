"""Objective residuals: how well a released set does at each candidate architecture's
distillation objectives, against the adversary's auxiliary data.

A set distilled by gradient matching with architecture ``f`` was optimised until the per-class
gradients of freshly initialised (and briefly trained) ``f`` networks on it point where their
gradients on real data point; distribution matching made the class means of its embeddings
under random ``f`` networks match the real ones. Evaluated for every candidate architecture,
these residuals are small for the architecture (and the algorithm) the set was made with, so
they fingerprint both. Per candidate architecture, averaged over ``inits`` random networks:

* the DC distance (Zhao et al. 2021: one minus the cosine of per-class weight gradients, row
  by row, biases left out; averaged over rows, layers and classes) between the set and the
  auxiliary data, at initialisation and after ``steps`` SGD steps on the set;
* the DM discrepancy (Zhao and Bilen 2023): the squared distance of per-class mean
  embeddings, relative to the mean squared norm of the auxiliary embeddings.

Each enters the fingerprint as its logarithm. [inferred] The features are ours; measured on the
digits default run (the last session's sets), see :mod:`trainleak.attacks.distillation.reveal`.

References:
    Zhao, Mopuri and Bilen, "Dataset Condensation with Gradient Matching", ICLR 2021.
    Zhao and Bilen, "Dataset Condensation with Distribution Matching", WACV 2023.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trainleak.attacks.distillation._common import spec_key, tensor_hash
from trainleak.linalg import cosine_gap
from trainleak.models.embedding import embed
from trainleak.models.registry import build_model
from trainleak.models.spec import ModelSpec
from trainleak.releases.distilled import DistilledSet

FEATURES_PER_ARCHITECTURE = 3


def _weight_grads(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    params = [p for p in net.parameters() if p.ndim > 1]
    loss = F.cross_entropy(net(x), y)
    return list(torch.autograd.grad(loss, params))


def _dc_distance(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Mean over layers of the mean over output rows of 1 - cos (DC's distance, averaged)."""
    total = 0.0
    for ga, gb in zip(a, b):
        ra, rb = ga.reshape(ga.shape[0], -1), gb.reshape(gb.shape[0], -1)
        total += float(cosine_gap(ra, rb).mean())
    return total / max(len(a), 1)


def _aux_grads(
    net: nn.Module, aux: tuple[torch.Tensor, torch.Tensor], classes: list[int]
) -> list[list[torch.Tensor]]:
    """The weight gradients of ``net`` on each class's auxiliary records."""
    return [_weight_grads(net, *aux_at(aux, aux[1] == c)) for c in classes]


def _gradient_residual(
    net: nn.Module,
    syn: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    ref: list[list[torch.Tensor]],
    classes: list[int],
) -> float:
    """Mean over classes of the DC distance between the set's gradients and ``ref``, the
    auxiliary gradients of each class (:func:`_aux_grads` of the same network)."""
    x, y, hard = syn
    out = []
    for c, grads in zip(classes, ref, strict=True):
        mine = hard == c
        out.append(_dc_distance(_weight_grads(net, x[mine], y[mine]), grads))
    return sum(out) / len(out)


_INIT_REF: dict[str, list[list[torch.Tensor]]] = {}
"""The auxiliary gradients of the freshly initialised networks, by (architecture, network
seed, auxiliary records, classes): the same for every set fingerprinted against the same
records, so each is computed once per run instead of once per set."""


def _init_ref(
    net: nn.Module,
    key: str,
    aux: tuple[torch.Tensor, torch.Tensor],
    classes: list[int],
) -> list[list[torch.Tensor]]:
    hit = _INIT_REF.get(key)
    if hit is None:
        hit = _aux_grads(net, aux, classes)
        if len(_INIT_REF) >= 256:
            _INIT_REF.clear()
        _INIT_REF[key] = hit
    return hit


def aux_at(
    aux: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The auxiliary records under ``mask``."""
    return aux[0][mask], aux[1][mask]


def _embedding_residual(
    net: nn.Module,
    x: torch.Tensor,
    hard: torch.Tensor,
    aux: tuple[torch.Tensor, torch.Tensor],
    classes: list[int],
) -> float:
    with torch.no_grad():
        es, ea = embed(net, x), embed(net, aux[0])
    scale = float(ea.pow(2).sum(1).mean()) + 1e-12
    gaps = [float((es[hard == c].mean(0) - ea[aux[1] == c].mean(0)).pow(2).sum()) for c in classes]
    return sum(gaps) / len(gaps) / scale


def objective_residuals(
    release: DistilledSet,
    spec: ModelSpec,
    aux: tuple[torch.Tensor, torch.Tensor],
    *,
    inits: int,
    steps: int,
    lr: float,
    seed: int,
) -> list[float]:
    """log DC distance at initialisation, after ``steps`` steps on the set, and log DM
    discrepancy, each averaged over ``inits`` networks of ``spec``; classes without
    auxiliary or synthetic images are left out."""
    x, labels, hard = release.images.float(), release.labels, release.hard_labels
    present = set(aux[1].unique().tolist())
    classes = [c for c in hard.unique().tolist() if c in present]
    if not classes:
        return [0.0] * FEATURES_PER_ARCHITECTURE
    sums = [0.0] * FEATURES_PER_ARCHITECTURE
    where = f"{spec_key([spec])}|{tensor_hash(*aux)}|{classes}"
    for i in range(inits):
        net_seed = seed * 1000 + 500 + i
        net = build_model(spec, seed=net_seed)
        sums[2] += _embedding_residual(net, x, hard, aux, classes)
        at_init = _init_ref(net, f"{where}|{net_seed}", aux, classes)
        sums[0] += _gradient_residual(net, (x, labels, hard), at_init, classes)
        opt = torch.optim.SGD(net.parameters(), lr=lr, foreach=True)
        for _ in range(steps):
            loss = F.cross_entropy(net(x), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        sums[1] += _gradient_residual(
            net, (x, labels, hard), _aux_grads(net, aux, classes), classes
        )
    return [math.log(max(v / inits, 1e-12)) for v in sums]
