"""What an attack's output says, with and without the user's reference set.

Without ground truth only the attack's own evidence counts: its certificates (erasure decoding
certifies samples by the update's residual), and its fit (a KKT residual, a matching loss),
which says nothing by itself about whether a candidate is a training record.

With a reference set (the training records the user wants protected, never shown to an
attack) the candidates are scored with :mod:`trainleak.metrics`, and so is a baseline given the
same budget (the same number of candidates, drawn from the public prior when the knowledge
has one, else uniform noise in the value range), so a candidate that merely looks like the
data set's average does not count as leakage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from trainleak.attacks import Reconstruction
from trainleak.experiments.risk import AttackFinding
from trainleak.metrics import evaluate_reconstruction, reconstruction_grid
from trainleak.metrics.baselines import mean_image_candidates, random_candidates
from trainleak.metrics.labelled_grid import labelled_candidates, to_unit_range
from trainleak.releases.knowledge import Knowledge

SSIM_RECOVERED = 0.6
THRESHOLDS = (0.4, SSIM_RECOVERED)
EXACT_TOL = 1e-3  # of the value range
_OWN_FIT = ("kkt_loss_final", "residual_relative", "final_loss", "loss_final", "objective")


@dataclass(frozen=True)
class ReferenceSet:
    """The user's private records: scored against, never shown to an attack."""

    x: torch.Tensor
    y: torch.Tensor | None = None


@dataclass
class Scored:
    """An attack's finding, its numbers for the report, and its image grid (if images)."""

    finding: AttackFinding
    metrics: dict[str, Any] = field(default_factory=dict)
    grid: np.ndarray | None = None


def image_shape(shape: tuple[int, ...]) -> tuple[int, int, int] | None:
    """``(C, H, W)`` when inputs of ``shape`` are images (or square flat vectors), else None."""
    if len(shape) == 3 and shape[0] in (1, 3):
        return (shape[0], shape[1], shape[2])
    if len(shape) == 2:
        return (1, shape[0], shape[1])
    side = math.isqrt(shape[0]) if len(shape) == 1 else 0
    return (1, side, side) if len(shape) == 1 and side * side == shape[0] and side >= 4 else None


def own_evidence(name: str, rec: Reconstruction, of: int | None) -> Scored:
    """The finding from the attack's own output only (no ground truth)."""
    diag = dict(rec.diagnostics)
    fit = next((f"{k} = {diag[k]:.3g}" for k in _OWN_FIT if isinstance(diag.get(k), float)), "")
    if rec.certified is not None:
        n_cert = int(rec.certified.sum())
        finding = AttackFinding(
            attack=name,
            candidates=len(rec),
            recovered=n_cert,
            of=of,
            quality=1.0 if n_cert else None,
            quality_metric="exact, certified by the update's residual",
            certainty="certified",
            certified=n_cert,
            detail=f"{n_cert} certified, {len(rec) - n_cert} uncertified" + _sep(fit),
        )
    else:
        finding = AttackFinding(
            attack=name,
            candidates=len(rec),
            recovered=None,
            of=of,
            quality_metric="unknown without a reference set",
            detail=fit or "no certificate",
        )
    return Scored(finding, {"candidates": len(rec), **_scalars(diag)})


def _sep(text: str) -> str:
    return f"; own fit {text}" if text else ""


def _scalars(diag: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in diag.items() if isinstance(v, int | float | bool | str)}


def score_against(
    name: str,
    rec: Reconstruction,
    ref: ReferenceSet,
    knowledge: Knowledge,
    seed: int = 0,
    recovered_ssim: float = SSIM_RECOVERED,
) -> Scored:
    """The finding from scoring ``rec`` (and an equal-budget baseline) against ``ref``.

    The baseline depends only on ``seed`` and the number of candidates, so attacks given the
    same budget face the same baseline. ``recovered_ssim`` is the SSIM at which an image
    record counts as recovered."""
    own = own_evidence(name, rec, len(ref.x))
    shape = tuple(ref.x.shape[1:])
    if len(rec) and rec.inputs[0].numel() != ref.x[0].numel():
        own.metrics["not scored"] = f"candidates of shape {tuple(rec.inputs.shape[1:])}"
        return own
    cands = rec.inputs.reshape(len(rec), *shape).to(torch.float64) if len(rec) else None
    if cands is None:
        finding = AttackFinding(name, 0, 0, len(ref.x), None, "no candidates", "ground truth")
        return Scored(finding, own.metrics)
    span = _span(knowledge, ref.x)
    truth = ref.x.to(torch.float64)
    generator = torch.Generator().manual_seed(seed * 100_003 + len(rec))
    base = _baseline(knowledge, shape, len(rec), generator, truth)
    img = image_shape(shape)
    if img is not None:
        return _score_images(name, own, truth, cands, base, img, knowledge, span, recovered_ssim)
    exact = _exact(truth, cands, span)
    error = _nearest_error(truth, cands) / span**2
    finding = AttackFinding(
        attack=name,
        candidates=len(rec),
        recovered=exact,
        of=len(truth),
        quality=exact / len(truth),
        quality_metric=f"exact to {EXACT_TOL:g} of the value range",
        certainty="ground truth",
        baseline_recovered=_exact(truth, base, span),
        error=error,
        detail=own.finding.detail,
        certified=own.finding.certified,
    )
    return Scored(finding, {**own.metrics, "exact": exact, "mse_per_coordinate_01": error})


def _span(knowledge: Knowledge, x: torch.Tensor) -> float:
    if knowledge.value_range is not None:
        return float(knowledge.value_range[1] - knowledge.value_range[0])
    return max(float(x.max() - x.min()), 1e-12)


def _baseline(
    knowledge: Knowledge,
    shape: tuple[int, ...],
    m: int,
    generator: torch.Generator,
    like: torch.Tensor,
) -> torch.Tensor:
    """``m`` candidates an adversary gets without the release: prior samples (cycled) and the
    prior mean (the auxiliary records when there is no prior), or uniform noise in the value
    range."""
    prior = knowledge.prior
    if prior is None and knowledge.auxiliary is not None:
        prior = knowledge.auxiliary[0]
    if prior is not None and prior[0].numel() == like[0].numel():
        p = prior.reshape(len(prior), *shape).to(torch.float64)
        pick = torch.randperm(len(p), generator=generator)[: max(m - 1, 1)]
        picks = p[pick][torch.arange(max(m - 1, 1)) % len(pick)]
        return torch.cat([mean_image_candidates(p, 1), picks])[:m]
    lo, hi = knowledge.value_range or (float(like.min()), float(like.max()) + 1e-12)
    return random_candidates(shape, m, generator, (lo, hi)).to(torch.float64)


def _exact(truth: torch.Tensor, cands: torch.Tensor, span: float) -> int:
    d = torch.cdist(truth.flatten(1), cands.flatten(1), p=float("inf"))
    return int((d.min(1).values <= EXACT_TOL * span).sum())


def _nearest_error(truth: torch.Tensor, cands: torch.Tensor) -> float:
    d = torch.cdist(truth.flatten(1), cands.flatten(1))
    return float((d.min(1).values ** 2).mean() / truth[0].numel())


def _score_images(
    name: str,
    own: Scored,
    truth: torch.Tensor,
    cands: torch.Tensor,
    base: torch.Tensor,
    img: tuple[int, int, int],
    knowledge: Knowledge,
    span: float,
    rule: float = SSIM_RECOVERED,
) -> Scored:
    thresholds = tuple(sorted({*THRESHOLDS, rule}))
    scores = evaluate_reconstruction(truth, cands, thresholds=thresholds, image_shape=img)
    base_scores = evaluate_reconstruction(truth, base, thresholds=thresholds, image_shape=img)
    matched = cands[scores.matched]
    error = float(((truth - matched) ** 2).mean()) / span**2
    recovered = scores.counts[rule]
    finding = AttackFinding(
        attack=name,
        candidates=len(cands),
        recovered=recovered,
        of=len(truth),
        quality=scores.median_ssim,
        quality_metric=f"SSIM >= {rule:g} with its matched original; median SSIM "
        f"{scores.median_ssim:.2f}",
        certainty="ground truth",
        baseline_recovered=base_scores.counts[rule],
        error=error,
        detail=own.finding.detail,
        certified=own.finding.certified,
    )
    grid = reconstruction_grid(
        to_unit_range(truth, knowledge.value_range),
        to_unit_range(cands, knowledge.value_range),
        scores,
        n=min(32, len(truth)),
        normalize=False,
        image_shape=img,
    )
    metrics = {
        **own.metrics,
        **{f"attack {k}": v for k, v in scores.summary().items()},
        **{f"baseline {k}": v for k, v in base_scores.summary().items()},
        "exact": _exact(truth, cands, span),
        "mse_per_coordinate_01": error,
    }
    return Scored(finding, metrics, grid)


def candidates_grid(rec: Reconstruction, knowledge: Knowledge, n: int = 32) -> np.ndarray | None:
    """The highest-scored candidates (certified ones first), labelled as unverified."""
    shape = tuple(rec.inputs.shape[1:])
    img = image_shape(shape)
    if img is None or len(rec) == 0:
        return None
    key = rec.scores.double() if rec.scores is not None else torch.zeros(len(rec))
    if rec.certified is not None:
        key = key + 1e12 * rec.certified.double()
    order = torch.argsort(key, descending=True, stable=True)[:n]
    x = to_unit_range(rec.inputs[order].reshape(len(order), *img), knowledge.value_range)
    cert = rec.certified
    caps = ["certified" if cert is not None and bool(cert[i]) else "unverified" for i in order]
    return labelled_candidates(x, "reconstruction", caps)
