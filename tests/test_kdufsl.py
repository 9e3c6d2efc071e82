"""KD-UFSL (seed 15): MDAV microaggregation, exact k-anonymity, the Gaussian mechanism on
smashed data, and its accountant against the closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conftest import require_module
from release_fixtures import tiny_split
from trainleak.attacks.split_learning._common import defend
from trainleak.bounds.split_learning import smashed_dp_epsilon
from trainleak.data import load_digits
from trainleak.defenses import split_learning as kd
from trainleak.defenses.split_learning import (
    KDUFSL,
    SubspaceSketch,
    all_finite,
    centroid_replace,
    clip_and_noise,
    k_anonymity,
    mdav,
)
from trainleak.errors import ConfigError
from trainleak.models.registry import model_spec
from trainleak.models.split import SplitSpec
from trainleak.releases.split_learning import SmashedDefenseSpec, SplitTranscript
from trainleak.scenarios.split_learning import settings_grid
from trainleak.systems.split_learning import UFSLConfig, train_ufsl


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


def _smashed_like(n: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.relu(torch.randn(n, d, generator=g) + 0.3 * torch.randn(n, 1, generator=g))


def _basis(d: int, m: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((d, m)) / m**0.5


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("n", "k"), [(256, 2), (256, 4), (256, 8), (61, 3), (40, 8), (7, 3)])
@pytest.mark.parametrize("m", [4, 16])
def test_mdav_on_a_basis_is_mdav_of_the_projected_records(
    seed: int, n: int, k: int, m: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a basis ``V``, the compiled direct loop (numba) and the distance-matrix fallback
    both form exactly the reference MDAV groups of ``x V`` (float32 and float64 records)."""
    require_module("numba", "pip install 'trainleak[fast]'")
    assert kd.compiled_kernel() is not None
    x, v = _smashed_like(n, 48, 1000 * seed + n + k), _basis(48, m, seed)
    ref, gap = _reference_mdav(x.double().numpy() @ v, k)
    assert gap > 1e-5  # the premise: no decision is a near-tie
    assert mdav(x.double(), k, v).tolist() == ref.tolist()
    assert mdav(x, k, v).tolist() == ref.tolist()
    monkeypatch.setattr(kd, "_KERNELS", [None])  # as without the `fast` extra
    assert mdav(x.double(), k, v).tolist() == ref.tolist()


def test_direct_loop_breaks_ties_by_the_lowest_index_like_the_exact_path() -> None:
    """Points 0..8 on a line and a doubled unit square (every decision a tie), through the
    direct loop on the records themselves: the groups of the Gram-matrix path."""
    require_module("numba", "pip install 'trainleak[fast]'")
    kernel = kd.compiled_kernel()
    assert kernel is not None
    line = np.arange(9.0).reshape(9, 1)
    assert kernel(line, 3).tolist() == mdav(torch.from_numpy(line), 3).tolist()
    square = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]] * 2)
    assert kernel(square, 2).tolist() == mdav(torch.from_numpy(square), 2).tolist()


def _sse(x: torch.Tensor, groups: torch.Tensor) -> float:
    return float(((x - centroid_replace(x, groups)) ** 2).sum())


def _low_rank_batches(seed: int, batches: int) -> list[torch.Tensor]:
    """Batches of 256 smashed-like records (dim 128) whose spread lies mostly in 6
    directions, the same distribution in every batch."""
    g = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(torch.randn(128, 6, generator=g))[0]
    scales = torch.tensor([6.0, 5.0, 4.0, 3.0, 2.5, 2.0])
    return [
        torch.relu(2 + (torch.randn(256, 6, generator=g) * scales) @ basis.T)
        + 0.2 * torch.randn(256, 128, generator=g)
        for _ in range(batches)
    ]


@pytest.mark.parametrize("k", [2, 4, 8])
def test_tracked_subspace_groups_as_tightly_as_exact_mdav_and_a_random_one_does_not(
    k: int,
) -> None:
    """After a few refreshes on earlier batches the tracked 8-dim subspace is the principal
    one: on a new batch its groups' squared error (full space) is within 10% of exact MDAV's;
    the untrained random start of the same dimension is more than 10% worse, so the test
    measures the tracking, not the sketch dimension."""
    *earlier, batch = _low_rank_batches(k, 13)
    exact = _sse(batch, mdav(batch, k))
    start = SubspaceSketch(8, refresh=1, seed=1)
    random_start = _sse(batch, start.group(batch, k))
    tracked = SubspaceSketch(8, refresh=1, seed=1)
    for b in earlier:
        tracked.group(b, k)
    assert _sse(batch, tracked.group(batch, k)) <= 1.10 * exact
    assert random_start > 1.10 * exact


def test_sketch_tracks_after_powers_of_two_and_every_refresh_batches() -> None:
    sk = SubspaceSketch(4, refresh=6)
    steps = []
    for b in _low_rank_batches(0, 13):
        before = None if sk.basis is None else sk.basis.copy()
        sk.group(b, 2)
        steps.append(before is not None and not np.array_equal(sk.basis, before))
        assert np.allclose(sk.basis.T @ sk.basis, np.eye(4), atol=1e-5)
    # a step follows batches 1, 2, 4, 8 and the multiples of 6 (the first creates the basis)
    assert [i + 1 for i, moved in enumerate(steps) if moved] == [2, 4, 6, 8, 12]


@pytest.mark.parametrize("compiled", [True, False])
def test_tracking_orthonormalises_the_same_subspace_with_or_without_numba(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if compiled:
        require_module("numba", "pip install 'trainleak[fast]'")
    else:
        monkeypatch.setattr(kd, "_KERNELS", [None])
    rng = np.random.default_rng(0)
    yt = rng.standard_normal((8, 512)) * np.logspace(0, -3, 8)[:, None]
    q = kd._orthonormal_rows(yt)
    assert q is not None
    assert np.allclose(q @ q.T, np.eye(8), atol=1e-10)
    # the same span: each row of yt is reproduced by its projection on q's rows
    assert np.allclose((yt @ q.T) @ q, yt, atol=1e-10)
    dependent = yt.copy()
    dependent[5] = 2 * dependent[1] - dependent[3]
    assert kd._orthonormal_rows(dependent) is None
    broken = yt.copy()
    broken[2, 7] = np.nan
    assert kd._orthonormal_rows(broken) is None


def test_sketched_defense_is_k_anonymous_and_travels_with_the_transcript() -> None:
    spec = SmashedDefenseSpec(k=4, sigma=0.5, clip=1.0, sketch=8)
    d = KDUFSL(spec)
    for seed in range(6):  # past a refresh
        out = d.transmit(torch.randn(61, 4, 3, 3), torch.Generator().manual_seed(seed))
        assert k_anonymity(out.rows) >= 4
    assert d.tracker() is not None and d.tracker().batches == 6
    assert spec.to_json()["sketch"] == 8
    assert SmashedDefenseSpec(**spec.to_json()) == spec
    assert "sketch" not in SmashedDefenseSpec(k=4).to_json()  # exact: as before the knob
    assert KDUFSL(SmashedDefenseSpec(k=4)).tracker() is None


@pytest.mark.parametrize("bad", [0, -3, 2.5, "8"])
def test_bad_sketch_dimension_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="sketch"):
        SmashedDefenseSpec(k=2, sketch=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sketch"):
        SubspaceSketch(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sketch_refresh"):
        SmashedDefenseSpec(k=2, sketch=4, sketch_refresh=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sketch_refresh"):
        SubspaceSketch(4, refresh=bad)  # type: ignore[arg-type]


def test_a_basis_of_the_wrong_dimension_is_refused() -> None:
    with pytest.raises(ConfigError, match="basis"):
        mdav(torch.randn(8, 5), 2, np.ones((4, 2)))


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


def test_sketched_run_saves_a_k_anonymous_transcript_an_adaptive_attacker_can_replay(
    tmp_path,
) -> None:
    """UFSL trained with the sketched defense: each client keeps its own tracker, every step
    of the saved and reloaded transcript is 4-anonymous, the transcript names the sketch, and
    the adaptive attacker's replay of the public defense on its own images (its own tracker)
    sends 4-anonymous batches too."""
    ds = load_digits()
    clients = [(ds.x[i * 64 : (i + 1) * 64], ds.y[i * 64 : (i + 1) * 64]) for i in range(2)]
    spec = SplitSpec(
        model_spec("split_convnet", input_shape=(1, 8, 8), out_dim=10, channels=[4], hidden=[32]),
        1,
        2,
        (1, 8, 8),
    )
    defense = KDUFSL(SmashedDefenseSpec(k=4, sketch=8, sketch_refresh=2))
    run = train_ufsl(clients, spec, UFSLConfig(rounds=2, batch_size=32, lr=0.05), defense=defense)
    # each client tracks its own subspace on its own batches only (2 rounds x 2 batches)
    assert sorted(defense.trackers) == [0, 1]
    assert [t.batches for t in defense.trackers.values()] == [4, 4]
    assert not np.array_equal(defense.trackers[0].basis, defense.trackers[1].basis)
    tr = SplitTranscript.load(run.transcript.save(tmp_path / "t"))
    assert tr.defense == SmashedDefenseSpec(k=4, sketch=8, sketch_refresh=2)
    for _, rows in tr.batches():
        assert k_anonymity(tr.smashed[rows]) >= 4
    head = run.parts.head
    with torch.no_grad():
        sent = defend(tr, head, ds.x[400:464], torch.Generator().manual_seed(0), adaptive=True)
    # the replay puts rows back in the images' order: count identical rows over the whole set
    assert torch.unique(sent.reshape(64, -1), dim=0, return_counts=True)[1].min() >= 4


def test_settings_grid_passes_the_sketch_to_every_mdav_setting_and_only_those() -> None:
    grid = settings_grid([0.05], [2, 4], 0.05, 8.0, sketch=8, sketch_refresh=4)
    mdav_specs = [s for name, s in grid.items() if name.startswith(("mdav", "kd"))]
    assert len(mdav_specs) == 4
    assert all(s is not None and (s.sketch, s.sketch_refresh) == (8, 4) for s in mdav_specs)
    assert grid["vanilla"] is None and grid["dp_s0.05"].sketch is None
    assert all(
        s is None or s.sketch is None for s in settings_grid([0.05], [2], 0.05, 8.0).values()
    )
