"""Erasure decoding never below imprint at a fixed neuron budget (issue 11, part 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainleak.errors import ConfigError
from trainleak.scenarios.federated import active_cell
from trainleak.systems.federated.data import Pool, load_pool
from trainleak.systems.federated.design import choose_groups, predicted_recovery


@pytest.fixture(scope="module")
def pool(data_dir: Path) -> Pool:
    return load_pool("mnist", n_public=300, data_dir=data_dir, limit=800)


def test_prediction_matches_the_single_group_formula_and_the_peeling_threshold() -> None:
    assert predicted_recovery(128, 128, 1) == pytest.approx(0.3679, abs=1e-3)  # exp(-1)
    assert predicted_recovery(64, 256, 3) > 0.999  # load 0.25: below the 2-core threshold
    assert predicted_recovery(128, 128, 3) < 0.3  # load 1: above it, peeling stalls early


def test_the_server_splits_neurons_only_when_peeling_pays() -> None:
    assert choose_groups(128, 128) == 1 and choose_groups(256, 64) == 1
    assert choose_groups(64, 128) == 3 and choose_groups(128, 1024) == 3
    with pytest.raises(ConfigError, match="max_groups"):
        choose_groups(8, 8, max_groups=0)
    with pytest.raises(ConfigError, match="neurons"):
        predicted_recovery(8, 0, 1)


@pytest.mark.parametrize(("neurons", "batch"), [(16, 16), (16, 32), (32, 16), (32, 32)])
def test_erasure_with_the_chosen_groups_recovers_at_least_imprint(
    pool: Pool, neurons: int, batch: int
) -> None:
    for seed in range(2):
        erasure, imprint = active_cell(pool, batch, neurons=neurons, seed=seed)
        assert erasure["neurons"] == imprint["neurons"]
        assert erasure["exact_rate"] >= imprint["exact_rate"]
        assert erasure["false_certificates"] == 0


def test_three_groups_forced_above_the_threshold_fall_below_imprint(pool: Pool) -> None:
    """The mechanism the choice fixes: at load B / K = 1 three groups lose to one (summed over
    six cells; measured 1.60 against 1.84, single cells fluctuate either way)."""
    forced, chosen = 0.0, 0.0
    for seed in range(3):
        for size in (64, 128):
            forced += active_cell(pool, size, neurons=size, n_groups=3, seed=seed)[0]["exact_rate"]
            chosen += active_cell(pool, size, neurons=size, seed=seed)[0]["exact_rate"]
    assert forced < chosen - 0.1
