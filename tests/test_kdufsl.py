"""KD-UFSL (seed 15): MDAV microaggregation, exact k-anonymity, the Gaussian mechanism on
smashed data, and its accountant against the closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from release_fixtures import tiny_split
from trainleak.bounds.split_learning import smashed_dp_epsilon
from trainleak.defenses.split_learning import (
    KDUFSL,
    all_finite,
    centroid_replace,
    clip_and_noise,
    k_anonymity,
    mdav,
)
from trainleak.errors import ConfigError
from trainleak.releases.split_learning import SmashedDefenseSpec


@pytest.mark.parametrize(("n", "k"), [(10, 3), (64, 2), (64, 4), (64, 8), (13, 4), (5, 5), (7, 3)])
def test_mdav_groups_have_between_k_and_2k_minus_1_members(n: int, k: int) -> None:
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(n * k))
    sizes = torch.bincount(mdav(x, k))
    assert int(sizes.min()) >= k
    assert int(sizes.max()) <= 2 * k - 1 or len(sizes) == 1
    assert int(sizes.sum()) == n


def test_mdav_groups_nearby_records() -> None:
    """Two well separated clusters of 4: k = 4 recovers them exactly."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(4, 3, generator=g), 50 + torch.randn(4, 3, generator=g)])
    groups = mdav(x, 4)
    assert len(set(groups[:4].tolist())) == 1 and len(set(groups[4:].tolist())) == 1
    assert groups[0] != groups[4]


def test_mdav_follows_the_algorithm_on_a_line() -> None:
    """Points 0..8 on a line, k = 3: r = 0 (farthest from the centroid 4, first of the tie),
    its group {0,1,2}; s = 8, group {6,7,8}; the 3 left form the last group."""
    x = torch.arange(9.0).reshape(9, 1)
    groups = mdav(x, 3)
    assert groups.tolist() == [0, 0, 0, 2, 2, 2, 1, 1, 1]


def _reference_mdav(x: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """MDAV as Domingo-Ferrer and Mateo-Sanz (2002) state it, every distance computed
    directly from the records (float64), the centroid recomputed at each step. Also returns
    the smallest relative gap met at a decision (a farthest record against the runner-up, a
    k-th nearest against the next), so a test can verify it has no near-ties."""
    x = x.astype(np.float64)
    groups = np.full(len(x), -1)
    alive = np.arange(len(x))
    gaps: list[float] = []

    def dist(p: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.asarray(((x[idx] - p) ** 2).sum(1))

    def farthest(p: np.ndarray, idx: np.ndarray) -> int:
        dd = np.sort(dist(p, idx))
        gaps.append((dd[-1] - dd[-2]) / dd[-1])
        return int(idx[int(np.argmax(dist(p, idx)))])

    def group_around(c: int, gid: int) -> None:
        nonlocal alive
        dd = dist(x[c], alive)
        order = np.argsort(dd, kind="stable")
        if len(order) > k:
            gaps.append((dd[order[k]] - dd[order[k - 1]]) / max(dd[order[k]], 1e-300))
        groups[alive[order[:k]]] = gid
        alive = alive[np.sort(order[k:])]

    gid = 0
    while len(alive) >= 3 * k:
        r = farthest(x[alive].mean(0), alive)
        s = farthest(x[r], alive)
        group_around(r, gid)
        group_around(s, gid + 1)
        gid += 2
    if len(alive) >= 2 * k:
        group_around(farthest(x[alive].mean(0), alive), gid)
        gid += 1
    groups[alive] = gid
    return groups, min(gaps, default=1.0)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("n", "k"), [(256, 2), (256, 4), (256, 8), (61, 3), (40, 8)])
def test_fast_mdav_gives_the_reference_groups(seed: int, n: int, k: int) -> None:
    """The Gram-matrix MDAV forms exactly the groups of the direct implementation, on
    smashed-like (ReLU, partly zero) random records in float32 and float64 (no near-ties)."""
    g = torch.Generator().manual_seed(1000 * seed + n + k)
    x = torch.relu(torch.randn(n, 48, generator=g) + 0.3 * torch.randn(n, 1, generator=g))
    ref, gap = _reference_mdav(x.double().numpy(), k)
    assert gap > 1e-5  # the premise: no decision is a near-tie
    assert mdav(x.double(), k).tolist() == ref.tolist()
    assert mdav(x, k).tolist() == ref.tolist()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_defense_refuses_each_kind_of_non_finite_smashed_data(bad: float) -> None:
    x = torch.randn(12, 2, 3, 3, generator=torch.Generator().manual_seed(1))
    assert all_finite(x) and all_finite(torch.empty(0, 3))
    x[7, 1, 2, 0] = bad
    assert not all_finite(x)
    with pytest.raises(ConfigError, match="smashed.*finite"):
        KDUFSL(SmashedDefenseSpec(k=3)).transmit(x, torch.Generator())


def test_k_larger_than_the_batch_is_refused() -> None:
    with pytest.raises(ConfigError, match="'k'.*batch size 5"):
        mdav(torch.randn(5, 2), 6)
    with pytest.raises(ConfigError, match="'k'.*batch size 5"):
        KDUFSL(SmashedDefenseSpec(k=6)).transmit(torch.randn(5, 2), torch.Generator())
    with pytest.raises(ConfigError, match="'k'"):
        mdav(torch.randn(5, 2), 0)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_transmitted_batch_is_exactly_k_anonymous(k: int) -> None:
    d = KDUFSL(SmashedDefenseSpec(k=k, sigma=0.5, clip=1.0))
    out = d.transmit(torch.randn(61, 4, 3, 3), torch.Generator().manual_seed(k))
    counts = torch.unique(out.rows.reshape(61, -1), dim=0, return_counts=True)[1]
    assert int(counts.min()) >= k
    assert k_anonymity(out.rows) == int(counts.min())
    # each row is its group's centroid, bit-identical across members
    for gid in out.groups.unique():
        rows = out.rows[out.groups == gid]
        assert bool((rows == rows[0]).all())


def test_k_anonymity_check_detects_a_unique_row() -> None:
    rows = torch.tensor([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [3.0, 4.0]])
    assert k_anonymity(rows) == 1
    assert k_anonymity(rows[:3]) == 3
    nearly = rows[:3].clone()
    nearly[2, 1] = torch.nextafter(torch.tensor(2.0), torch.tensor(3.0))
    assert k_anonymity(nearly) == 1


def test_transcript_of_a_defended_run_is_k_anonymous_per_step() -> None:
    tr, _, _ = tiny_split(defense_k=4, sigma=0.5)
    for _, rows in tr.batches():
        assert k_anonymity(tr.smashed[rows]) >= 4
    undefended, _, _ = tiny_split()
    assert k_anonymity(undefended.smashed[next(undefended.batches())[1]]) == 1


def test_centroid_gradient_is_shared_equally() -> None:
    x = torch.randn(6, 3, requires_grad=True)
    groups = torch.tensor([0, 0, 1, 1, 1, 0])
    w = torch.randn(6, 3)
    (centroid_replace(x, groups) * w).sum().backward()
    assert x.grad is not None
    expect = torch.stack([w[groups == groups[i]].sum(0) / 3 for i in range(6)])
    assert torch.allclose(x.grad, expect, atol=1e-6)


def test_clip_and_noise_clips_and_has_the_declared_std() -> None:
    x = torch.randn(2000, 50) * 10
    clipped = clip_and_noise(x, 2.0, 0.0, torch.Generator())
    assert float(clipped.norm(dim=1).max()) <= 2.0 + 1e-5
    noisy = clip_and_noise(x, 2.0, 0.5, torch.Generator().manual_seed(0))
    assert abs(float((noisy - clipped).std()) - 1.0) < 0.02  # sigma * C = 1


def test_input_side_switch_moves_the_noise() -> None:
    x = torch.rand(8, 1, 4, 4)
    g = torch.Generator().manual_seed(0)
    inp = KDUFSL(SmashedDefenseSpec(k=1, sigma=0.5, clip=1.0, where="input"))
    assert not torch.equal(inp.perturb_input(x, g), x)
    assert torch.equal(inp.transmit(x, g).rows, x)
    smashed = KDUFSL(SmashedDefenseSpec(k=1, sigma=0.5, clip=1.0))
    assert torch.equal(smashed.perturb_input(x, g), x)


def test_defense_spec_is_validated() -> None:
    with pytest.raises(ConfigError, match="clip"):
        SmashedDefenseSpec(sigma=0.5)
    with pytest.raises(ConfigError, match="where"):
        SmashedDefenseSpec(where="labels")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'k'"):
        SmashedDefenseSpec(k=0)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("transmissions", [1, 20])
def test_accountant_matches_the_zcdp_closed_form(sigma: float, transmissions: int) -> None:
    """The grid of Renyi orders reaches rho + 2 sqrt(rho log(1/delta)) (Bun and Steinke),
    from above, for rho = T * (2C)^2 / (2 sigma^2 C^2)."""
    delta = 1e-5
    g = smashed_dp_epsilon(sigma, transmissions, delta)
    rho = transmissions * 4.0 / (2 * sigma**2)
    closed = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert g.rho == pytest.approx(rho)
    assert closed - 1e-9 <= g.epsilon <= closed * (1 + 1e-4)
    assert g.order == pytest.approx(1 + math.sqrt(math.log(1 / delta) / rho), rel=1e-2)
    half = smashed_dp_epsilon(sigma, transmissions, delta, "add_remove")
    assert half.rho == pytest.approx(rho / 4)


def test_accountant_composes_and_refuses_bad_input() -> None:
    eps = [smashed_dp_epsilon(1.0, t, 1e-5).epsilon for t in (1, 2, 4, 8)]
    assert all(np.diff(eps) > 0)
    with pytest.raises(ConfigError, match="sigma"):
        smashed_dp_epsilon(0.0, 1, 1e-5)
    with pytest.raises(ConfigError, match="delta"):
        smashed_dp_epsilon(1.0, 1, 1.0)
    with pytest.raises(ConfigError, match="transmissions"):
        smashed_dp_epsilon(1.0, 0, 1e-5)
