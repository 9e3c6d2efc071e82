"""Seed 7: Data Collaboration alignment, collusion attacks, noise defenses, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from release_fixtures import tiny_collaboration
from trainleak.attacks.collaboration.collusion import (
    AnchorInversionAttack,
    AnchorProcrustesAttack,
    PivotAttack,
)
from trainleak.defenses.collaboration import AnchorNoise, PrivateNoise
from trainleak.errors import MissingKnowledgeError, ShapeError
from trainleak.metrics.collaboration import linkage_rate, relative_error
from trainleak.releases.collaboration import SharedRepresentations, Upload
from trainleak.releases.collaboration_alignment import align
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.collaboration import DCParty, collaborate
from trainleak.systems.collaboration.data import random_anchor, synthetic_faces


def _setup(parties: int = 4, rows: int = 40, m: int = 16, seed: int = 0):  # type: ignore[no-untyped-def]
    X, ids, attr = synthetic_faces(40, 6, m, seed=seed)
    owner = np.random.default_rng(seed).integers(0, parties, len(ids))
    ps = [DCParty(X[owner == p], attr[owner == p], seed=100 + p) for p in range(parties)]
    anchor = random_anchor(X, rows, seed)
    kn = Knowledge(disclosures=(ps[0].disclose(0, anchor),))
    target = np.concatenate([np.flatnonzero(owner == p) for p in range(1, parties)])
    return collaborate(ps, anchor), kn, X, ids, target


@pytest.mark.parametrize("method", ["imakura", "odc", "gopp_spectral"])
def test_noiseless_alignment_agrees_across_parties(method: str) -> None:
    release, _, _, _, _ = _setup()
    al = align(release, method)  # type: ignore[arg-type]
    anchors = [u.anchor.numpy() - o for u, o in zip(release.uploads, al.offsets)]
    ref = anchors[0] @ al.maps[0]
    assert all(np.abs(a @ G - ref).max() < 1e-9 for a, G in zip(anchors, al.maps))


@pytest.mark.parametrize(
    "attack", [AnchorInversionAttack(), AnchorProcrustesAttack(), PivotAttack()]
)
def test_noiseless_full_rank_anchor_gives_exact_recovery(attack) -> None:  # type: ignore[no-untyped-def]
    release, kn, X, ids, target = _setup()
    rec = attack(release, kn).inputs.numpy()
    assert relative_error(rec, X[target]) < 1e-10
    assert linkage_rate(rec, ids[target], X, ids) == 1.0


def test_anchor_noise_stops_inversion_but_pivot_tracks_alignment() -> None:
    release, kn, X, ids, target = _setup()
    noisy = AnchorNoise(1.5)(release, torch.Generator().manual_seed(0))
    inv = relative_error(AnchorInversionAttack()(noisy, kn).inputs.numpy(), X[target])
    pro = relative_error(AnchorProcrustesAttack()(noisy, kn).inputs.numpy(), X[target])
    assert inv > 0.5 and pro < inv  # Procrustes is the better estimator under anchor noise


def test_private_noise_cannot_hide_the_transform() -> None:
    release, kn, X, _, target = _setup()
    noisy = PrivateNoise(0.3)(release, torch.Generator().manual_seed(0))
    rec = AnchorInversionAttack()(noisy, kn).inputs.numpy()
    # leakage is exactly X_i + E_i Q_i^T: the error is the noise level, nothing more
    err = np.sqrt(((rec - X[target]) ** 2).mean())
    assert 0.25 < err < 0.35


def test_several_colluders_pool_their_rows() -> None:
    X, ids, attr = synthetic_faces(20, 4, 12, seed=1)
    ps = [DCParty(X[p::4], attr[p::4], seed=p) for p in range(4)]
    anchor = random_anchor(X, 30, 1)
    release = AnchorNoise(0.8)(collaborate(ps, anchor), torch.Generator().manual_seed(1))
    one = Knowledge(disclosures=(ps[0].disclose(0, None),))
    two = Knowledge(disclosures=(ps[0].disclose(0, None), ps[1].disclose(1, None)))
    r1 = PivotAttack()(release, one)
    r2 = PivotAttack()(release, two)
    assert r1.diagnostics["colluder_rows"] < r2.diagnostics["colluder_rows"]
    assert r2.diagnostics["parties"] == [2, 3]


def test_bad_input_errors() -> None:
    release, kn, ps = tiny_collaboration(m=4, r=4)  # 4 rows: centred rank 3 < m = 4
    with pytest.raises(ShapeError, match="rank 3 < m = 4"):
        AnchorInversionAttack()(release, kn)
    AnchorProcrustesAttack()(release, kn)  # works (approximately) with any rank
    with pytest.raises(MissingKnowledgeError, match="disclosures"):
        PivotAttack()(release, Knowledge(record_norm=1.0))
    up = release.uploads
    bad = Upload(
        torch.zeros(3, 5, dtype=torch.float64),
        torch.zeros(4, 5, dtype=torch.float64),
        torch.zeros(3, dtype=torch.int64),
    )
    with pytest.raises(ShapeError, match="participant 1"):
        SharedRepresentations((up[0], bad))
    with pytest.raises(ShapeError, match="anchor must have shape"):
        ps[0].upload(np.zeros((4, 7)))


def test_experiment_runs_small_config() -> None:
    from trainleak.experiments import get_experiment

    exp = get_experiment("collaboration-collusion")
    cfg = exp.make_config(
        {"synthetic_identities": 30, "noise_levels": [0.0, 1.0], "party_counts": [2, 4], "dim": 8,
         "anchor_rows": 16, "data_dir": "/nonexistent"}
    )  # fmt: skip
    result = exp.run(cfg)
    assert "orl_tradeoff" not in result.tables  # no ORL data: that part is skipped
    assert result.tables["synthetic_tradeoff"][0]["inversion_linkage"] == 1.0
    assert result.claims[0].holds and result.claims[-1].holds
    card = result.risk  # the noiseless anchor inversion links every record
    assert card is not None and card.level == "high" and card.attack is not None
    assert card.attack.recovered == card.attack.of and "sigma 0, tau 0" in card.release
