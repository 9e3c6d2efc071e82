"""rho-zCDP: the lower bounds, the private regression mechanism and the transition."""

from __future__ import annotations

import math

import pytest
import torch

from trainleak.attacks.informed import InformedRidgeAttack
from trainleak.bounds.zcdp import zcdp_mse_bound, zcdp_success_bound
from trainleak.errors import ConfigError
from trainleak.experiments.zcdp_transition import _trial
from trainleak.systems.mechanisms import (
    ridge_output_perturbation,
    ridge_sensitivity,
    sphere_records,
    subspace_records,
)


def test_gaussian_slb_and_sphere_bound() -> None:
    assert zcdp_mse_bound(5.0, 10, "gaussian").value == pytest.approx(math.exp(-1.0))
    vals = [zcdp_mse_bound(r * 32, 32).value for r in (0.01, 0.1, 0.3, 1.0)]
    assert all(a > b for a, b in zip(vals, vals[1:]))
    assert all(v <= math.exp(-2 * r) + 0.02 for v, r in zip(vals, (0.01, 0.1, 0.3, 1.0)))
    assert vals[0] > 0.95
    assert 0 < zcdp_success_bound(1.0, 64, 0.5).value < 0.1


def test_sensitivity_holds_on_random_neighbours() -> None:
    g = torch.Generator().manual_seed(0)
    for n, d, lam in ((20, 5, 1.0), (40, 10, 40.0), (10, 8, 0.3)):
        delta = ridge_sensitivity(n, lam)
        for _ in range(20):
            x, y = sphere_records(n, d, g)
            x2, y2 = x.clone(), y.clone()
            x2[-1], y2[-1] = sphere_records(1, d, g)[0][0], -y[-1]
            th = [torch.linalg.solve(a.T @ a + lam * torch.eye(d, dtype=a.dtype), a.T @ b)
                  for a, b in ((x, y), (x2, y2))]  # fmt: skip
            assert float((th[0] - th[1]).norm()) <= delta


def test_transition_direction_and_bound_validity() -> None:
    d, g = 16, torch.Generator().manual_seed(1)
    attack = InformedRidgeAttack()
    for r, lo, hi in ((0.1, 0.8, 2.0), (300.0, 0.0, 0.1)):
        errs = [_trial(*sphere_records(2 * d, d, g), r * d, g, attack)[0] for _ in range(20)]
        mean = sum(errs) / len(errs)
        assert lo <= mean <= hi
        assert zcdp_mse_bound(r * d, d).value <= mean


def test_known_subspace_moves_the_transition() -> None:
    d, s, g = 64, 4, torch.Generator().manual_seed(2)
    basis = subspace_records(1, d, s, g)[2]
    errs: dict[str, list[float]] = {"none": [], "known": []}
    for _ in range(15):
        x, y, _ = subspace_records(2 * d, d, s, g, basis)
        errs["none"].append(_trial(x, y, 50.0 * s, g, InformedRidgeAttack())[0])
        errs["known"].append(
            _trial(x, y, 50.0 * s, g, InformedRidgeAttack(subspace="known"), basis)[0]
        )
    assert sum(errs["known"]) < 0.5 * sum(errs["none"])


def test_bad_input() -> None:
    g = torch.Generator().manual_seed(0)
    x, y = sphere_records(8, 4, g)
    with pytest.raises(ConfigError, match="rho"):
        ridge_output_perturbation(x, y, lam=1.0, rho=0.0, generator=g)
    with pytest.raises(ConfigError, match="'x'"):
        ridge_output_perturbation(2 * x, y, lam=1.0, rho=1.0, generator=g)
    with pytest.raises(ConfigError, match="rho"):
        zcdp_mse_bound(-1.0, 4)
    with pytest.raises(ConfigError, match="prior"):
        zcdp_mse_bound(1.0, 4, "laplace")  # type: ignore[arg-type]
