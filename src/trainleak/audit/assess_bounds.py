"""Which bounds apply to a loaded release, computed from what the release declares.

* A release trained with DP-SGD (its spec declares ``dp_sgd``): the rate-distortion lower bound
  on the distortion of any reconstruction (:func:`~trainleak.bounds.dpsgd.dpsgd_distortion_bound`,
  needs a prior sample of images in the knowledge), the success bound of Hayes et al. for a
  target among the prior's records (:func:`~trainleak.bounds.published.hayes_success_bound`),
  and Guo et al.'s bound, valid for unbiased estimators only
  (:func:`~trainleak.bounds.published.guo_unbiased_bound`). They are proved for an adversary
  who sees the whole training trajectory; a final checkpoint or one update is a function of
  it, so they hold for it too (data processing).
* A FedSGD update whose batch size is declared: the update-Jacobian counting argument
  (:mod:`trainleak.bounds.jacobian`): when ``B p > d`` a manifold of at least ``B p - d``
  dimensions of batches gives exactly the same update, so no attack can single out the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trainleak.bounds.dpsgd import Schedule, dpsgd_distortion_bound
from trainleak.bounds.jacobian import batch_size_threshold
from trainleak.bounds.published import guo_unbiased_bound, hayes_success_bound
from trainleak.experiments.risk import BoundFinding
from trainleak.metrics.labelled_grid import to_unit_range
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.io import LoadedRelease
from trainleak.releases.knowledge import Knowledge

MAX_PRIOR = 2000
HAYES_SAMPLES = 20_000


@dataclass(frozen=True)
class NotApplicable:
    """A bound that was considered and does not apply, with the reason."""

    name: str
    reason: str


def applicable_bounds(
    loaded: LoadedRelease, knowledge: Knowledge
) -> tuple[list[BoundFinding], list[NotApplicable]]:
    """Every bound that applies to ``loaded`` with ``knowledge``, and why the others do not."""
    found: list[BoundFinding] = []
    skipped: list[NotApplicable] = []
    if loaded.dp_sgd is None:
        skipped.append(
            NotApplicable("DP-SGD bounds", "the release declares no DP-SGD schedule (dp_sgd)")
        )
    else:
        dp = loaded.dp_sgd
        schedule = Schedule.constant(dp.sampling_rate, dp.noise_multiplier, dp.steps)
        found.append(_guo(schedule))
        _with_prior(schedule, dp.delta, knowledge, found, skipped)
    release = loaded.release
    if isinstance(release, GradientUpdate):
        _counting(release, found, skipped)
    return found, skipped


def _guo(schedule: Schedule) -> BoundFinding:
    r = guo_unbiased_bound(schedule, diameter=1.0)
    return BoundFinding(
        name="Guo et al. 2022 (unbiased estimators)",
        value=r.value,
        unit="mean squared error per coordinate, [0, 1] scale",
        kind="lower",
        statement=f"an unbiased reconstruction has MSE >= {r.value:.4g} per coordinate",
        assumptions=r.assumptions,
        general=False,
    )


def _with_prior(
    schedule: Schedule,
    delta: float,
    knowledge: Knowledge,
    found: list[BoundFinding],
    skipped: list[NotApplicable],
) -> None:
    prior = knowledge.prior
    if prior is None or len(prior) < 2:
        skipped.append(
            NotApplicable(
                "DP-SGD rate-distortion and Hayes et al. bounds",
                "they need a prior sample of the population (knowledge: prior)",
            )
        )
        return
    n = min(len(prior), MAX_PRIOR)
    hayes = hayes_success_bound(schedule, n, samples=HAYES_SAMPLES)
    found.append(
        BoundFinding(
            name="Hayes et al. 2023 (reconstruction robustness)",
            value=hayes.value,
            unit="success probability",
            kind="upper",
            statement=(
                f"no attack identifies a training record among {n} equally likely candidates "
                f"with probability above {hayes.value:.3g} (chance: {1 / n:.3g})"
            ),
            assumptions=hayes.assumptions,
        )
    )
    x = prior[:n]
    if x.ndim == 2 and math.isqrt(x.shape[1]) ** 2 == x.shape[1]:
        side = math.isqrt(x.shape[1])
        x = x.reshape(n, 1, side, side)
    if x.ndim != 4:
        skipped.append(
            NotApplicable("DP-SGD rate-distortion bound", "it needs image-shaped prior samples")
        )
        return
    x01 = to_unit_range(x, knowledge.value_range).to(torch.float32)
    r = dpsgd_distortion_bound(schedule, x01, delta=delta)
    psnr = r.components.get("psnr_ceiling", float("nan"))
    found.append(
        BoundFinding(
            name="DP-SGD rate-distortion bound",
            value=r.value,
            unit="mean squared error per coordinate, [0, 1] scale",
            kind="lower",
            statement=(
                f"any reconstruction of a training record has expected MSE >= {r.value:.4g} per "
                f"coordinate on the [0, 1] scale (PSNR <= {psnr:.1f} dB; epsilon = "
                f"{r.components.get('epsilon', float('nan')):.3g} at delta = {delta:g})"
            ),
            assumptions=r.assumptions,
        )
    )


def _counting(
    release: GradientUpdate, found: list[BoundFinding], skipped: list[NotApplicable]
) -> None:
    name = "update-Jacobian counting (Zhang & Chen 2024)"
    b = release.batch_size
    w = release.parameters.get("layers.0.weight")
    if b is None or w is None or w.ndim != 2:
        skipped.append(NotApplicable(name, "it needs the batch size and a linear first layer"))
        return
    d, p = release.n_values, int(w.shape[1])
    threshold = batch_size_threshold(d, p)
    if b * p <= d:
        skipped.append(
            NotApplicable(name, f"B p = {b * p} <= d = {d}: counting allows a unique batch")
        )
        return
    found.append(
        BoundFinding(
            name=name,
            value=float(b * p - d),
            unit="dimensions of batches giving the same update",
            kind="lower",
            statement=(
                f"at least {b * p - d} dimensions of batches give exactly this update "
                f"(B = {b} >= {threshold} = d / p + 1), so the update alone cannot single "
                "out the true batch"
            ),
            assumptions="the update map is differentiable with constant rank near the batch",
        )
    )
