"""Seed 16: deletions under perfect retraining, the recovery bound, protection of the undeleted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from release_fixtures import tiny_transcript
from trainleak.attacks.unlearning.retraining import RetrainingReconstructionAttack
from trainleak.bounds.deletion import majority_vote_recovery, single_release_limit
from trainleak.errors import ConfigError
from trainleak.scenarios.deletion import distinguishing_advantage, rr_transcript_rates
from trainleak.systems.unlearning import (
    DPLogisticRegression,
    ExactSum,
    RandomizedResponse,
    UnlearningMechanism,
)


def test_fresh_coins_reach_the_bound_and_beat_one_release() -> None:
    bits = np.random.default_rng(0).integers(0, 2, 4000)
    fresh = rr_transcript_rates(bits, 1.0, "fresh", [0, 51])
    single = single_release_limit(1.0).value
    bound = majority_vote_recovery(1.0, 51)
    assert abs(fresh[0] - single) < 0.03
    assert fresh[1] > 0.99 and abs(fresh[1] - bound.value) < 0.01
    assert fresh[1] >= bound.components["hoeffding_lower"]


@pytest.mark.parametrize("randomness", ["coupled", "protected"])
def test_coupled_and_protected_stay_at_single_release_rate(randomness: str) -> None:
    bits = np.random.default_rng(1).integers(0, 2, 4000)
    rates = rr_transcript_rates(bits, 1.0, randomness, [0, 21])  # type: ignore[arg-type]
    single = single_release_limit(1.0).value
    assert all(abs(r - single) < 4 * math.sqrt(single * (1 - single) / 4000) for r in rates)


def test_positional_coupling_leaks_when_deletions_shift_order() -> None:
    bits = np.random.default_rng(2).integers(0, 2, 2000)
    first = rr_transcript_rates(bits, 1.0, "coupled", [21], adversary_first=True)
    protected = rr_transcript_rates(bits, 1.0, "protected", [21], adversary_first=True)
    assert first[0] > 0.95 and protected[0] < 0.8


def test_distinguishing_advantage_protected_vs_fresh() -> None:
    limit = single_release_limit(1.0).components["advantage"]
    fresh = distinguishing_advantage("fresh", 1.0, 21, trials=150, seed=0)
    protected = distinguishing_advantage("protected", 1.0, 21, trials=150, seed=0)
    margin = 3 * math.sqrt(0.5 / 150)
    assert protected <= limit + margin
    assert fresh > 0.9 > limit + margin


def test_bound_values_and_errors() -> None:
    assert majority_vote_recovery(1.0, 0).value == pytest.approx(math.e / (1 + math.e))
    assert majority_vote_recovery(1.0, 1).value == pytest.approx(math.e / (1 + math.e))  # tie coin
    assert majority_vote_recovery(1.0, 51).components["composition_upper"] <= 1.0
    with pytest.raises(ConfigError, match="'eps'"):
        majority_vote_recovery(0.0, 3)
    with pytest.raises(ConfigError, match="'deletions'"):
        majority_vote_recovery(1.0, -1)


def test_exact_sum_reveals_only_deleted_points() -> None:
    rng = np.random.default_rng(0)
    data = rng.random((12, 3))
    mech = UnlearningMechanism(ExactSum(), "fresh")
    s0 = mech.fit(np.arange(12), data)
    s1 = mech.delete([11])
    assert np.abs((s0 - s1)[0] - data[11]).max() < 1e-12


def test_dp_logreg_fresh_noise_averages_out_coupled_does_not() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((150, 5))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.where(x[:, 0] > 0, 1.0, -1.0)
    data = np.hstack([x, y[:, None]])
    base = DPLogisticRegression(eps=1.0, lam=0.05)
    theta = base.fit(data[:120])
    errs = {}
    for r in ("fresh", "coupled"):
        mech = UnlearningMechanism(base, r)  # type: ignore[arg-type]
        outs = [mech.fit(np.arange(150), data)] + [mech.delete([120 + i]) for i in range(30)]
        errs[r] = (np.linalg.norm(outs[0] - theta), np.linalg.norm(np.mean(outs, 0) - theta))
    assert errs["fresh"][1] < 0.4 * errs["fresh"][0]
    assert errs["coupled"][1] > 0.7 * errs["coupled"][0]


def test_attack_modes_and_bad_input() -> None:
    transcript, bits = tiny_transcript(k=21)
    vote = RetrainingReconstructionAttack()(transcript)
    one = RetrainingReconstructionAttack(max_releases=1)(transcript)
    assert (vote.inputs[:, 0].numpy() == bits).mean() > (one.inputs[:, 0].numpy() == bits).mean()
    with pytest.raises(ConfigError, match="'combine'"):
        RetrainingReconstructionAttack(combine="median")  # type: ignore[arg-type]
    mech = UnlearningMechanism(RandomizedResponse(1.0), "fresh")
    mech.fit(np.arange(3), np.array([0, 1, 0]))
    with pytest.raises(ConfigError, match="'ids'"):
        mech.delete([7])
    with pytest.raises(ConfigError, match="'randomness'"):
        UnlearningMechanism(RandomizedResponse(1.0), "sticky")  # type: ignore[arg-type]


@pytest.mark.slow
def test_experiment_runs_small_config() -> None:
    from trainleak.experiments import get_experiment

    exp = get_experiment("deletion-reconstruction")
    cfg = exp.make_config(
        {"n_honest": 2000, "epsilons": [1.0], "deletions": [0, 51], "trials": 40, "lr_n": 60}
    )
    result = exp.run(cfg)
    row = [r for r in result.tables["recovery"] if r["k"] == 51][0]
    assert row["fresh"] > 0.99 and row["protected"] < 0.8
    assert result.claims[0].holds
    card = result.risk
    assert card is not None and card.level == "high" and "after 51 deletions" in card.release
