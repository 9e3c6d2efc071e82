"""Update-Jacobian theory (seed 17): rank criterion, collision witness, leakage bound."""

from __future__ import annotations

import pytest
import torch

from trainleak.bounds.jacobian import (
    batch_size_threshold,
    find_collision,
    leakage_metric,
    leakage_upper_bound,
    lower_lipschitz_estimate,
    nonuniqueness_certificate,
    update_jacobian,
)
from trainleak.data import load_digits
from trainleak.errors import ConfigError, ShapeError
from trainleak.models import build_model, model_spec
from trainleak.models.functional import batch_gradient


def _softmax() -> torch.nn.Module:
    spec = model_spec("mlp", input_shape=(64,), hidden=[], out_dim=10)
    return build_model(spec, seed=0).to(torch.float64)


def _digits(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    ds = load_digits()
    return ds.x[:n].reshape(n, -1).to(torch.float64), ds.y[:n]


def test_threshold_counts_parameters_against_inputs() -> None:
    assert batch_size_threshold(650, 64) == 11
    assert batch_size_threshold(1210, 64) == 19
    with pytest.raises(ConfigError, match=r"\(d, p\)"):
        batch_size_threshold(0, 64)


def test_softmax_regression_rank_is_min_of_bp_and_the_gradient_subspace() -> None:
    model = _softmax()
    x, y = _digits(12)
    small = nonuniqueness_certificate(model, x[:4], y[:4])
    assert small.rank == 4 * 64 and not small.non_unique and not small.sufficient
    big = nonuniqueness_certificate(model, x, y)
    # the CE gradient's rows sum to zero: rank <= (C - 1)(p + 1) = 585 < d = 650
    assert big.rank == 585 and big.sufficient and big.null_dim == 12 * 64 - 585


def test_jacobian_matches_finite_differences() -> None:
    model = _softmax()
    x, y = _digits(2)
    j = update_jacobian(model, x, y)
    v = torch.randn(x.numel(), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    h = 1e-6

    def u(xx: torch.Tensor) -> torch.Tensor:
        return torch.cat([g.reshape(-1) for g in batch_gradient(model, xx, y).values()])

    fd = (u(x + h * v.reshape(x.shape)) - u(x - h * v.reshape(x.shape))) / (2 * h)
    torch.testing.assert_close(j @ v, fd, rtol=1e-6, atol=1e-9)
    assert update_jacobian(model, x, y, local_steps=2, lr=0.1).shape == j.shape


def test_collision_witness_above_the_threshold_stays_in_the_data_box() -> None:
    model = _softmax()
    x, y = _digits(16)
    col = find_collision(model, x, y, box=(0.0, 1.0), generator=torch.Generator().manual_seed(0))
    assert col.update_gap < 1e-10 and col.distance > 1e-3
    assert bool((col.x >= 0).all() and (col.x <= 1).all())
    assert float((col.x - x).abs().max()) > 1e-3


def test_no_collision_below_the_threshold() -> None:
    model = _softmax()
    x, y = _digits(3)
    with pytest.raises(ShapeError, match="full column rank"):
        find_collision(model, x, y)


def test_leakage_bound_is_linear_in_distortion_with_audited_parts() -> None:
    values = [leakage_upper_bound(8, d, c_a=0.5, diameter=2.0).value for d in (0, 1, 2)]
    assert values[0] > values[1] > values[2]
    assert values[0] - values[1] == pytest.approx(0.5 / (2 * 2.0))
    r = leakage_upper_bound(8, 1.0, c_a=0.5, diameter=2.0, poly_coeff=0.0)
    assert r.kind == "upper"
    assert r.value == pytest.approx(
        1 + r.components["batch_term"] - r.components["distortion_term"]
    )
    with pytest.raises(ConfigError, match="diameter"):
        leakage_upper_bound(8, 1.0, c_a=0.5, diameter=0.0)


def test_leakage_metric_and_lipschitz_estimate() -> None:
    x, y = _digits(40)
    assert leakage_metric(x, [x, x], diameter=5.0) == pytest.approx(1.0)
    assert leakage_metric(x, [x + 1.0], diameter=16.0) == pytest.approx(0.5)
    c_a = lower_lipschitz_estimate(_softmax(), x, y, pairs=100)
    assert 0 < c_a < float("inf")


@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_certified_lower_constant_is_below_every_sampled_ratio(scale: float) -> None:
    from trainleak.bounds.jacobian import certified_lower_lipschitz_softmax
    from trainleak.models.functional import per_sample_gradients

    model = _softmax()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)  # scale 20: confident logits, a small constant
    w, b = model.get_parameter("layers.0.weight"), model.get_parameter("layers.0.bias")
    cert = certified_lower_lipschitz_softmax(w, b, (0.0, 1.0))
    assert cert > 0
    gen = torch.Generator().manual_seed(3)
    n = 400
    # pairs anywhere in the box, some of them nearly equal, all with the same label
    x = torch.rand(n, 64, generator=gen, dtype=torch.float64)
    x2 = (x + 1e-3 * torch.randn(n, 64, generator=gen, dtype=torch.float64)).clamp(0, 1)
    x2[: n // 2] = torch.rand(n // 2, 64, generator=gen, dtype=torch.float64).round()  # corners
    y = torch.randint(0, 10, (n,), generator=gen)
    flat = [
        torch.cat([v.reshape(n, -1) for v in per_sample_gradients(model, z, y).values()], 1)
        for z in (x, x2)
    ]
    ratios = (flat[0] - flat[1]).norm(dim=1) / (x - x2).norm(dim=1)
    assert float(ratios.min()) >= cert
    with pytest.raises(ConfigError, match="box"):
        certified_lower_lipschitz_softmax(w, b, (1.0, 0.0))
    with pytest.raises(ShapeError, match="bias"):
        certified_lower_lipschitz_softmax(w, b[:3])


def test_certified_constant_is_exact_in_its_confidence_term_for_two_classes() -> None:
    from trainleak.bounds.jacobian import certified_lower_lipschitz_softmax

    gen = torch.Generator().manual_seed(4)
    w = torch.randn(2, 9, generator=gen, dtype=torch.float64)
    b = torch.randn(2, generator=gen, dtype=torch.float64)
    worst = []
    for y in (0, 1):  # the most confident input in [0, 1]^9 is the corner maximising z_y - z_o
        x = (w[y] - w[1 - y] > 0).double()
        worst.append(1.0 - float(torch.softmax(w @ x + b, 0)[y]))
    cert = certified_lower_lipschitz_softmax(w, b, (0.0, 1.0))
    assert cert * (1 + 3.0) == pytest.approx(min(worst), rel=1e-12)  # 1 + max |x| = 1 + sqrt(9)
