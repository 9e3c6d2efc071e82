"""Seed 11: Gaussian-activation MLPs, their structural losses, and the prototype read-out."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import torch

from trainleak.attacks.checkpoint.prototypes import PrototypeReconstruction
from trainleak.errors import ConfigError, ShapeError
from trainleak.metrics.prototypes import hull_escape_fraction, matched_error, specialization_ratio
from trainleak.models.gaussian import GaussianMLP
from trainleak.models.registry import build_model, model_spec
from trainleak.releases import Checkpoint, Knowledge
from trainleak.systems.training.prototypes import (
    coverage_loss,
    overlap_loss,
    separation_loss,
    train_prototype_mlp,
)

KNOW = Knowledge(input_shape=(1,), value_range=(0.0, 1.0))


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny tensors: one thread is fastest, and on a shared machine two threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _release(model: GaussianMLP, i: int = 0) -> Checkpoint:
    spec = model_spec("gaussian_mlp", n_hidden=model.n_hidden)
    return Checkpoint(architecture=spec, final=model.replica_state(i))


def test_readout_returns_minus_b_over_w_exactly() -> None:
    model = GaussianMLP(n_hidden=3)
    with torch.no_grad():
        model.w.copy_(torch.tensor([[2.0, -4.0, 8.0]]))
        model.b.copy_(torch.tensor([[-1.0, 1.0, -2.0]]))
        model.v.copy_(torch.tensor([[0.1, 3.0, -1.0]]))
    rec = PrototypeReconstruction()(_release(model), KNOW)
    # ordered by |v|: unit 1 (p = 0.25), unit 2 (p = 0.25), unit 0 (p = 0.5)
    assert rec.inputs[:, 0].tolist() == [0.25, 0.25, 0.5]
    assert rec.scores is not None and rec.scores.tolist() == pytest.approx([3.0, 1.0, 0.1])
    top = PrototypeReconstruction(max_candidates=1)(_release(model), KNOW)
    assert top.inputs.shape == (1, 1)


def test_losses_match_their_definitions() -> None:
    gen = torch.Generator().manual_seed(0)
    x, p = torch.rand(2, 5, generator=gen), torch.rand(2, 4, generator=gen)
    tau = 0.05
    d2 = (x[0, :, None] - p[0, None, :]) ** 2
    want_cov = (-tau * torch.log(torch.exp(-d2 / tau).sum(1))).mean()
    assert float(coverage_loss(x, p, tau)[0]) == pytest.approx(float(want_cov), rel=1e-5)
    pairs = [
        float(torch.exp(-((p[0, j] - p[0, k]) ** 2) / tau))
        for j, k in itertools.combinations(range(4), 2)
    ]
    assert float(separation_loss(p, tau)[0]) == pytest.approx(sum(pairs) / len(pairs), rel=1e-5)
    h = torch.rand(1, 5, 4, generator=gen)
    brute = sum(
        float((h[0, :, j] * h[0, :, k]).mean()) for j in range(4) for k in range(4) if j != k
    )
    assert float(overlap_loss(h)[0]) == pytest.approx(brute / 12, rel=1e-5)


def _train(
    n: int, masks: list[tuple[int, int, int]], seeds: int, steps: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(123)
    x1 = torch.rand(seeds, n, generator=gen)
    x = x1.repeat(len(masks), 1)
    mask = torch.tensor(masks, dtype=torch.float32).repeat_interleave(seeds, 0)
    model = GaussianMLP(n_hidden=n, n_models=len(x))
    model.reset_parameters(torch.Generator().manual_seed(7))
    out = train_prototype_mlp(model, x, torch.sin(2 * torch.pi * x), mask, steps=steps)
    return x, model.prototypes().detach(), out.fit_mse


def test_coverage_beats_plain_fit_on_small_n() -> None:
    seeds = 8
    x, protos, fit = _train(10, [(0, 0, 0), (1, 0, 0)], seeds, steps=3000)
    err = [matched_error(x[i], protos[i])[0] for i in range(len(x))]
    plain, coverage = sum(err[:seeds]) / seeds, sum(err[seeds:]) / seeds
    assert coverage < 0.9 * plain, (coverage, plain)
    assert float(fit.max()) < 0.05  # both regimes fit the targets


def test_overlap_pushes_prototypes_out_of_the_hull_without_failing_the_fit() -> None:
    seeds = 6
    x, protos, fit = _train(20, [(1, 0, 0), (0, 0, 1)], seeds, steps=1500)
    out = [hull_escape_fraction(x[i], protos[i]) for i in range(len(x))]
    assert sum(out[seeds:]) / seeds > sum(out[:seeds]) / seeds + 0.1
    assert float(fit[seeds:].median()) < 0.01


def test_evaluation_helpers() -> None:
    x = torch.tensor([0.0, 0.5, 1.0])
    p = torch.tensor([1.1, 0.0, 0.4, 5.0])
    err, perm = matched_error(x, p)
    assert perm.tolist() == [1, 2, 0] and err == pytest.approx(0.2 / 3)
    assert specialization_ratio(x, p) == pytest.approx(3 / 4)
    assert hull_escape_fraction(x, p) == pytest.approx(2 / 4)
    with pytest.raises(ShapeError, match="at least 3 prototypes"):
        matched_error(x, p[:2])


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(ConfigError, match="n_hidden"):
        GaussianMLP(n_hidden=0)
    homog = build_model(model_spec("homogeneous_mlp", input_shape=(1,), hidden=[3]), seed=0)
    other = Checkpoint(
        architecture=model_spec("homogeneous_mlp", input_shape=(1,), hidden=[3]),
        final=dict(homog.state_dict()),
    )
    with pytest.raises(ConfigError, match="gaussian_mlp"):
        PrototypeReconstruction()(other, KNOW)
    batched = GaussianMLP(n_hidden=3, n_models=2)
    spec = model_spec("gaussian_mlp", n_hidden=3, n_models=2)
    with pytest.raises(ShapeError, match="n_models=1"):
        PrototypeReconstruction()(
            Checkpoint(architecture=spec, final=dict(batched.state_dict())), KNOW
        )
    with pytest.raises(ShapeError, match="input_shape"):
        PrototypeReconstruction()(_release(GaussianMLP(n_hidden=3)), Knowledge(input_shape=(2,)))
    model = GaussianMLP(n_hidden=3, n_models=2)
    x = torch.rand(2, 3)
    with pytest.raises(ShapeError, match="mask"):
        train_prototype_mlp(model, x, x, torch.ones(2, 2), steps=1)
    with pytest.raises(ConfigError, match="tau"):
        train_prototype_mlp(model, x, x, torch.ones(2, 3), steps=1, tau=-1.0)
