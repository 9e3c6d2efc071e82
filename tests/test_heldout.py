"""Held-out splits, equal-budget baselines, specificity, and the KKT task's public knowledge."""

from __future__ import annotations

import pytest
import torch

from trainleak.data import (
    ImageDataset,
    balanced_binary,
    balanced_binary_indices,
    heldout_split,
    load_digits,
    split_disjoint,
    to_symmetric,
)
from trainleak.errors import ConfigError, ShapeError
from trainleak.experiments._kkt_common import EQUAL_BUDGET, ORACLE, baselines_for, load_task
from trainleak.metrics import (
    check_equal_budget,
    heldout_candidates,
    perturbed_mean_candidates,
    specificity,
)


def ids_dataset(n: int = 200) -> ImageDataset:
    """Image k has every pixel equal to k / n, so parts can be told apart by value."""
    x = (torch.arange(n, dtype=torch.float32) / n).view(n, 1, 1, 1).expand(n, 1, 2, 2).clone()
    return ImageDataset("ids", x, torch.arange(n) % 10, tuple(str(d) for d in range(10)))


def ids(ds: ImageDataset) -> set[int]:
    return {round(float(v) * 200) for v in ds.x[:, 0, 0, 0]}


def test_split_disjoint_parts_are_disjoint_and_cover() -> None:
    a, b, c = split_disjoint(ids_dataset(), (0.5, 0.25, 0.25), seed=1)
    assert (len(a), len(b), len(c)) == (100, 50, 50)
    assert not ids(a) & ids(b) and not ids(a) & ids(c) and not ids(b) & ids(c)
    assert ids(a) | ids(b) | ids(c) == set(range(200))
    again = split_disjoint(ids_dataset(), (0.5, 0.25, 0.25), seed=1)[0]
    assert ids(again) == ids(a)
    assert ids(split_disjoint(ids_dataset(), (0.5, 0.5), seed=2)[0]) != ids(a)


@pytest.mark.parametrize("fractions", [(), (0.7, 0.7), (0.0, 0.5), (0.001, 0.5)])
def test_split_disjoint_rejects_bad_fractions(fractions: tuple[float, ...]) -> None:
    with pytest.raises(ConfigError, match="fractions"):
        split_disjoint(ids_dataset(), fractions)


def test_heldout_split_pools_and_public_mean() -> None:
    s = heldout_split(ids_dataset(), seed=3)
    parts = [ids(s.private), ids(s.public), ids(s.reference)]
    assert sum(len(p) for p in parts) == 200 and len(set().union(*parts)) == 200
    val, ev = ids(s.pool("validation")), ids(s.pool("evaluation"))
    assert not val & ev and val | ev == ids(s.private)
    expected = to_symmetric(s.public.x).mean(0, keepdim=True)
    assert torch.allclose(s.public_mean(), expected)
    with pytest.raises(ConfigError, match="public_fraction"):
        heldout_split(ids_dataset(), private_fraction=0.5, public_fraction=0.5)
    with pytest.raises(ConfigError, match="pool"):
        s.pool("test")  # type: ignore[arg-type]


def test_balanced_binary_indices_keep_original_classes() -> None:
    ds = load_digits()
    idx = balanced_binary_indices(ds, "odd_even", 20, seed=4)
    binary = balanced_binary(ds, "odd_even", 20, seed=4)
    assert torch.equal(ds.x[idx], binary.x)
    assert torch.equal(ds.y[idx] % 2, binary.y)
    assert len(set(ds.y[idx].tolist())) == 10


def test_task_knowledge_comes_from_public_data_only() -> None:
    a = load_task("digits", per_class=10, seed=0)
    b = load_task("digits", per_class=10, seed=1)
    assert not torch.equal(a.x, b.x)
    # the shift and the value range are the same whatever the training set is
    assert torch.equal(a.shift, b.shift) and a.knowledge() == b.knowledge()
    assert not torch.allclose(a.shift, a.x.mean(0, keepdim=True), atol=1e-3)
    assert torch.allclose(a.shift, a.public_x.mean(0, keepdim=True), atol=1e-5)
    lo, hi = a.knowledge().value_range or (0.0, 0.0)
    assert lo == pytest.approx(float((-1 - a.shift).min())) and hi == pytest.approx(
        float((1 - a.shift).max())
    )
    assert torch.allclose(a.to_image_space(torch.zeros_like(a.x[:1])), a.shift.clamp(-1, 1))
    raw = load_task("digits", per_class=10, seed=0, center=False)
    assert torch.equal(raw.model_x, raw.x) and raw.knowledge().value_range == (-1.0, 1.0)


def test_validation_and_evaluation_training_sets_are_disjoint() -> None:
    val = load_task("digits", per_class=30, seed=0, pool="validation")
    ev = load_task("digits", per_class=30, seed=0, pool="evaluation")

    def shared(a: torch.Tensor, b: torch.Tensor) -> int:
        return int((torch.cdist(a.flatten(1), b.flatten(1)) == 0).sum())

    assert shared(val.x, ev.x) == 0
    assert shared(val.x, val.reference_x) == 0 and shared(val.x, val.public_x) == 0
    assert shared(val.public_x, val.reference_x) == 0


def test_equal_budget_baselines() -> None:
    task = load_task("digits", per_class=10, seed=0)
    noise = torch.randn(40, *task.x.shape[1:], generator=torch.Generator().manual_seed(0))
    attack = (task.public_mean + 0.05 * noise).clamp(-1, 1)
    base = baselines_for(task, attack, seed=0)
    for name in EQUAL_BUDGET:
        role, cands = base[name]
        assert role == "baseline" and cands.shape == attack.shape
    assert base[ORACLE][0] == "oracle" and len(base[ORACLE][1]) == 10
    norms = (base["public mean + perturbations"][1] - task.public_mean).flatten(1).norm(dim=1)
    target = (attack - task.public_mean).flatten(1).norm(dim=1)
    # matched norms (up to the clamping to [-1, 1], which only shortens a perturbation)
    assert bool((norms <= target + 1e-4).all()) and float((target - norms).max()) < 0.1
    with pytest.raises(ConfigError, match="40 candidates"):
        check_equal_budget(40, {"short": attack[:10]})
    check_equal_budget(40, {"short": attack[:10]}, exempt={"short"})


def test_heldout_and_perturbed_candidates() -> None:
    g = torch.Generator().manual_seed(0)
    pub = torch.randn(30, 1, 4, 4, generator=g)
    c = heldout_candidates(pub, 12, g)
    match = torch.cdist(c.flatten(1), pub.flatten(1)).argmin(1)
    assert len(set(match.tolist())) == 12 and torch.allclose(c, pub[match])
    with pytest.raises(ConfigError, match="at most 30"):
        heldout_candidates(pub, 31, g)
    mean = torch.zeros(1, 1, 4, 4)
    p = perturbed_mean_candidates(mean, torch.tensor([0.5, 1.0, 3.0]), g)
    assert torch.allclose(p.flatten(1).norm(dim=1), torch.tensor([0.5, 1.0, 3.0]), atol=1e-5)
    clamped = perturbed_mean_candidates(mean, torch.tensor([50.0]), g, (-1.0, 1.0))
    assert float(clamped.abs().max()) <= 1.0
    with pytest.raises(ShapeError):
        perturbed_mean_candidates(torch.zeros(2, 1, 4, 4), torch.tensor([1.0]), g)
    with pytest.raises(ConfigError, match="norms"):
        perturbed_mean_candidates(mean, torch.tensor([-1.0]), g)


def test_specificity_separates_own_image_from_class_typical_images() -> None:
    g = torch.Generator().manual_seed(0)
    protos = torch.randn(2, 64, generator=g)
    held = (protos[torch.arange(40) % 2] + 0.5 * torch.randn(40, 64, generator=g)).view(40, 1, 8, 8)
    held_y = torch.arange(40) % 2
    train = (protos[torch.tensor([0, 1, 0])] + 0.5 * torch.randn(3, 64, generator=g)).view(
        3, 1, 8, 8
    )
    train_y = torch.tensor([0, 1, 0])
    # a noisy copy of each training image is specific
    near = train + 0.05 * torch.randn(train.shape, generator=g)
    s = specificity(train, train_y, near, held, held_y)
    assert s.count == 3 and s.rate == 1.0 and float(s.ratio.max()) < 0.5
    # the class prototype (a class mean) is closer to held-out images than to the training one
    proto = protos[train_y].view(3, 1, 8, 8)
    assert specificity(train, train_y, proto, held, held_y).count == 0
    # a held-out image of the same class as candidate: distance 0 to it, never specific
    assert specificity(train, train_y, held[train_y], held, held_y).count == 0
    # only held-out images of the same class compete: a near-copy of the candidate in the
    # held-out data defeats it when it has the training image's class, not otherwise
    twin = near[:1] + 0.001 * torch.randn(near[:1].shape, generator=g)
    held2 = torch.cat([held, twin])
    assert (
        specificity(train, train_y, near, held2, torch.cat([held_y, torch.tensor([0])])).count == 2
    )
    assert (
        specificity(train, train_y, near, held2, torch.cat([held_y, torch.tensor([1])])).count == 3
    )
    # scale and offset do not matter (NCC geometry)
    assert specificity(train, train_y, 3 * near + 1, held, held_y).count == 3
    assert specificity(train, train_y, near, held, held_y, threshold=1e-6).count == 0


def test_specificity_validates_input() -> None:
    x, y = torch.rand(3, 1, 4, 4), torch.zeros(3, dtype=torch.long)
    with pytest.raises(ShapeError):
        specificity(x, y, x[:2], x, y)
    with pytest.raises(ConfigError, match="every training class"):
        specificity(x, y, x, x, torch.ones(3, dtype=torch.long))
    with pytest.raises(ConfigError, match="threshold"):
        specificity(x, y, x, x, y, threshold=0.0)
    with pytest.raises(ShapeError):
        specificity(x, y, x, torch.rand(3, 1, 5, 5), y)
