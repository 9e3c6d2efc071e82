"""Inversion attacks on split-learning transcripts (seed 15): real attacks beat the
auxiliary-mean baseline, run on a saved transcript, and adapt to the defense."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from release_fixtures import tiny_split
from trainleak.attacks.split_learning import (
    InverseNetworkAttack,
    SubstituteHeadAttack,
    WhiteBoxHeadInversion,
)
from trainleak.attacks.split_learning._substitute import fit_substitute, mk_mmd
from trainleak.data import load_digits
from trainleak.errors import ConfigError
from trainleak.metrics.split_learning import (
    match_within_groups,
    score_reconstruction,
    transcript_groups,
)
from trainleak.models.split import split_modules
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_learning import SplitTranscript
from trainleak.scenarios.split_learning import check_disjoint, split_task


def _baseline(know: Knowledge, truth: torch.Tensor) -> tuple[float, float]:
    assert know.prior is not None
    s = score_reconstruction(know.prior.mean(0, keepdim=True).expand_as(truth), truth)
    return s.mse, s.ssim


def test_undefended_inverter_beats_the_auxiliary_mean() -> None:
    tr, know, truth = tiny_split()
    rec = InverseNetworkAttack(steps=150)(tr, know, seed=0)
    s = score_reconstruction(rec.inputs, truth)
    base_mse, base_ssim = _baseline(know, truth)
    assert s.mse < 0.5 * base_mse
    assert s.ssim > base_ssim + 0.15
    assert float(rec.inputs.min()) >= 0.0 and float(rec.inputs.max()) <= 1.0


def test_whitebox_inverts_the_undefended_head() -> None:
    tr, know, truth = tiny_split()
    rec = WhiteBoxHeadInversion(steps=60)(tr, know, seed=0)
    s = score_reconstruction(rec.inputs, truth)
    assert s.ssim > 0.85
    assert s.mse < 0.1 * _baseline(know, truth)[0]


def test_attack_runs_on_a_saved_transcript(tmp_path: Path) -> None:
    tr, know, _ = tiny_split()
    loaded = SplitTranscript.load(tr.save(tmp_path / "tr"))
    a = WhiteBoxHeadInversion(steps=5)
    assert torch.allclose(a(tr, know, seed=1).inputs, a(loaded, know, seed=1).inputs)


def test_mdav_costs_the_standard_inverter_and_adaptive_decodes_centroids() -> None:
    tr0, know, truth0 = tiny_split()
    tr4, _, truth4 = tiny_split(defense_k=4)
    plain = score_reconstruction(InverseNetworkAttack(steps=150)(tr0, know).inputs, truth0)
    groups = transcript_groups(tr4.smashed, tr4.step)
    std = score_reconstruction(InverseNetworkAttack(steps=150)(tr4, know).inputs, truth4, groups)
    assert std.mse > 1.5 * plain.mse  # MDAV takes real information away
    ad = InverseNetworkAttack(steps=150, adaptive=True)(tr4, know)
    assert ad.diagnostics["adaptive"] is True
    adapt = score_reconstruction(ad.inputs, truth4, groups)
    # a centroid decodes to its group's expected input: never a worse fit than the baseline
    assert adapt.mse < _baseline(know, truth4)[0]


def test_fora_substitute_moves_toward_the_smashed_distribution() -> None:
    tr, know, _ = tiny_split()
    assert know.prior is not None
    g = torch.Generator().manual_seed(0)
    fresh = split_modules(tr.split, seed=12345).head
    fitted = fit_substitute(
        tr, know.prior, steps=60, lr=3e-3, batch_size=64, adaptive=False, generator=g
    )
    target = tr.smashed[:120]
    with torch.no_grad():
        before = float(mk_mmd(fresh(know.prior[:120]), target))
        after = float(mk_mmd(fitted(know.prior[:120]), target))
    assert after < 0.5 * before
    rec = SubstituteHeadAttack(steps=30, substitute_steps=10)(tr, know)
    assert rec.inputs.shape == (len(tr), 1, 8, 8)


def test_prior_of_the_wrong_shape_is_refused() -> None:
    tr, know, _ = tiny_split()
    bad = Knowledge(prior=torch.rand(10, 1, 4, 4), value_range=(0.0, 1.0))
    with pytest.raises(ConfigError, match="prior"):
        InverseNetworkAttack(steps=1)(tr, bad)


def test_group_matching_pairs_members_by_least_error() -> None:
    truth = torch.stack([torch.zeros(1, 4, 4), torch.ones(1, 4, 4), torch.full((1, 4, 4), 0.5)])
    rec = truth[[1, 0, 2]]
    out = match_within_groups(rec, truth, torch.tensor([0, 0, 1]))
    assert torch.equal(out, truth)
    kept = match_within_groups(rec, truth, torch.tensor([0, 1, 2]))
    assert torch.equal(kept, rec)


def test_auxiliary_data_is_disjoint_from_the_clients() -> None:
    task = split_task("digits", 3, 50, 200, 100, seed=0)
    check_disjoint(task.private_x, task.aux)
    ds = load_digits()
    with pytest.raises(ConfigError, match="disjoint"):
        check_disjoint(ds.x[:50], ds.x[40:60])
