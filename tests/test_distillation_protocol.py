"""The per-setting protocol check: both sides trained the same way, every accuracy kept, and
each setting decided by an interval (issue 16)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainleak.data import load_digits
from trainleak.errors import ConfigError
from trainleak.models import model_spec
from trainleak.scenarios.distillation import Task
from trainleak.scenarios.distillation_bank import run_key
from trainleak.scenarios.distillation_protocol import (
    check_setting,
    full_accuracy,
    protocol_configs,
    setting_summary,
)
from trainleak.systems.distillation import (
    DMConfig,
    EvalProtocol,
    distill,
    evaluate_random_subsets,
    evaluate_set,
    random_subset_accuracies,
    set_accuracies,
)

DS = load_digits()
TASK = Task("digits", (DS.x[:500], DS.y[:500]), (DS.x[:0], DS.y[:0]), (DS.x[500:], DS.y[500:]), 10)
MLP = model_spec("mlp", input_shape=(1, 8, 8), hidden=[32], out_dim=10)
PROTOCOL = EvalProtocol(steps=150, models=2)


def test_check_setting_beats_random_at_one_image_per_class_with_every_accuracy_kept() -> None:
    cfg = DMConfig(ipc=1, iterations=100)
    chk = check_setting(TASK, MLP, cfg, PROTOCOL, seeds=2, draws=4)
    assert (chk.algorithm, chk.architecture, chk.ipc, chk.init) == ("dm", "mlp", 1, "real")
    assert len(chk.distilled) == 4 and len(chk.random) == 4 and chk.lr == (None, None)
    s = setting_summary(list(chk.distilled), list(chk.random))
    # measured: distilled 0.79-0.83 against random 0.49-0.74, gain lower bound 0.078
    assert s["gain_lower_95"] > 0.05, s
    assert s["distilled_95"][0] < s["distilled"] < s["distilled_95"][1]
    # the distilled side is exactly what set_accuracies gives on the seed's release
    run = distill(*TASK.private, 10, MLP, cfg, seed=1000)
    assert list(chk.distilled[:2]) == set_accuracies(run.release, MLP, TASK.holdout, PROTOCOL)


def test_random_side_uses_the_protocols_augmentation_and_budget() -> None:
    plain = random_subset_accuracies(*TASK.private, 1, MLP, TASK.holdout, PROTOCOL)
    aug = dataclasses.replace(PROTOCOL, augment=True)
    assert random_subset_accuracies(*TASK.private, 1, MLP, TASK.holdout, aug) != plain
    longer = dataclasses.replace(PROTOCOL, steps=300)
    assert random_subset_accuracies(*TASK.private, 1, MLP, TASK.holdout, longer) != plain


def test_setting_summary_intervals_and_a_setting_that_does_not_beat_random() -> None:
    s = setting_summary([0.80, 0.82, 0.81], [0.60, 0.62, 0.61])
    assert s["gain"] == pytest.approx(0.2) and s["gain_lower_95"] > 0.15
    assert s["random_95"][0] < 0.61 < s["random_95"][1] and s["n"] == [3, 3]
    close = setting_summary([0.90, 0.97, 0.93], [0.92, 0.93, 0.94])
    assert close["gain"] > 0 > close["gain_lower_95"]  # a positive mean gain is not enough
    one = setting_summary([0.9], [0.8, 0.7])
    assert one["gain_lower_95"] is None and one["distilled_95"] is None


def test_protocol_configs_scale_iterations_and_switch_dsa() -> None:
    dc, dm, mtt = protocol_configs(10, 2.5, augment=True)
    assert (dc.name, dm.name, mtt.name) == ("dc", "dm", "mtt")
    assert (dc.iterations, dm.iterations, mtt.iterations) == (50, 2500, 250)
    assert all(c.augment and c.ipc == 10 and c.init == "real" for c in (dc, dm, mtt))
    assert not protocol_configs(1, 1.0, augment=False)[0].augment


def test_full_accuracy_is_the_upper_reference() -> None:
    full = full_accuracy(TASK, MLP, PROTOCOL)
    rand = random_subset_accuracies(*TASK.private, 1, MLP, TASK.holdout, PROTOCOL)
    assert full > max(rand) + 0.1


def test_device_is_an_explicit_switch_that_keeps_cpu_cache_keys() -> None:
    x, y = TASK.private
    cfg = DMConfig(ipc=1, iterations=2)
    cpu = run_key(x, y, 10, MLP, cfg, 0, (0.0, 1.0))
    assert run_key(x, y, 10, MLP, cfg, 0, (0.0, 1.0), "cpu") == cpu
    assert run_key(x, y, 10, MLP, cfg, 0, (0.0, 1.0), "cuda") != cpu
    run = distill(x, y, 10, MLP, cfg, seed=0, device="cpu")
    assert run.release.images.device == torch.device("cpu")
    assert run.init_indices is not None and run.init_indices.device == torch.device("cpu")


# --- the learning-rate grid: each side chooses its rate on selection data, never on test ---

GRID = dataclasses.replace(PROTOCOL, lr_grid=(1e-5, 0.05))


def test_grid_keeps_the_rate_that_trains_and_reports_exactly_its_networks() -> None:
    run = distill(*TASK.private, 10, MLP, DMConfig(ipc=1, iterations=50), seed=1000)
    ev = evaluate_set(run.release, MLP, TASK.holdout, GRID, select=TASK.private)
    # a rate of 1e-5 leaves the network near its initialisation: 0.05 must win on selection
    assert ev.lr == 0.05 and ev.selection[0.05] > ev.selection[1e-5] + 0.2, ev.selection
    plain = set_accuracies(run.release, MLP, TASK.holdout, PROTOCOL)  # lr 0.05, no grid
    assert list(ev.accuracies) == plain
    rnd = evaluate_random_subsets(*TASK.private, 1, MLP, TASK.holdout, GRID, select=TASK.private)
    assert rnd.lr == 0.05 and list(rnd.accuracies) == random_subset_accuracies(
        *TASK.private, 1, MLP, TASK.holdout, PROTOCOL
    )
    # the other side of the choice: a grid whose only useful rate is the small one
    slow = dataclasses.replace(PROTOCOL, lr_grid=(0.05, 1e3))
    ev_slow = evaluate_set(run.release, MLP, TASK.holdout, slow, select=TASK.private)
    assert ev_slow.lr == 0.05 and ev_slow.selection[1e3] < ev_slow.selection[0.05]


def test_the_choice_reads_the_selection_data_not_the_test_data() -> None:
    run = distill(*TASK.private, 10, MLP, DMConfig(ipc=1, iterations=50), seed=1000)
    x, y = TASK.holdout
    scrambled = (x, (y + 1) % 10)  # every test label wrong
    a = evaluate_set(run.release, MLP, TASK.holdout, GRID, select=TASK.private)
    b = evaluate_set(run.release, MLP, scrambled, GRID, select=TASK.private)
    assert a.lr == b.lr and a.selection == b.selection
    # ...while selecting on the scrambled labels picks the rate that learns nothing
    c = evaluate_set(run.release, MLP, TASK.holdout, GRID, select=scrambled)
    assert c.lr == 1e-5


def test_grid_rates_bad_grids_and_a_missing_selection_set() -> None:
    g = EvalProtocol(lr_grid=(0.01, 0.05))
    assert g.rates() == [0.01, 0.05] and g.rates(0.03) == [0.01, 0.05, 0.03]
    assert g.rates(0.05) == [0.01, 0.05]  # a published rate already in the grid is not repeated
    assert EvalProtocol(lr=0.02).rates() == [0.02] and EvalProtocol().rates(0.07) == [0.07]
    for bad in [(0.01, -0.1), (0.01, 0.01), (0.0,)]:
        with pytest.raises(ConfigError, match="lr_grid"):
            EvalProtocol(lr_grid=bad)
    with pytest.raises(ConfigError, match="selection data"):
        random_subset_accuracies(*TASK.private, 1, MLP, TASK.holdout, GRID)
