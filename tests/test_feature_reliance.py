"""The two-cue task of the AT-AT seed (scenarios.feature_reliance): the data carry what they
claim, and training moves reliance the way robustness predicts for AT."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from trainleak.errors import ConfigError
from trainleak.experiments.atat_privacy import reliance_rows
from trainleak.experiments.model_inversion_claims import AtatPrivacyConfig
from trainleak.models.registry import model_spec
from trainleak.scenarios.feature_reliance import (
    Reliance,
    TwoCueTask,
    cue_patterns,
    draw,
    measure_reliance,
)
from trainleak.scenarios.inversion_targets import Recipe
from trainleak.systems.classifier import AdversarialTraining, Standard, TrainSettings


def test_draws_carry_their_cues() -> None:
    task = TwoCueTask(sigma=0.0)
    pats = cue_patterns(task, 0)
    gen = torch.Generator().manual_seed(1)
    train = draw(task, pats, 4000, gen)
    assert train.x.min() >= 0 and train.x.max() <= 1
    assert torch.equal(train.nonrobust, train.y)
    agree = float((train.robust == train.y).float().mean())
    assert abs(agree - task.p_robust) < 0.02
    conflict = draw(task, pats, 500, gen, conflict=True)
    assert torch.equal(conflict.robust, conflict.y)
    assert bool((conflict.robust != conflict.nonrobust).all())
    # without noise each image is exactly grey + its two patterns
    i = 7
    rob, non = pats
    want = 0.5 + task.amplitude * rob[conflict.robust[i]] + task.delta * non[conflict.nonrobust[i]]
    assert torch.allclose(conflict.x[i], want.clamp(0, 1))
    # the non-robust cue is imperceptible: every pixel within delta of the robust-only image
    assert float(
        (conflict.x[i] - (0.5 + task.amplitude * rob[conflict.robust[i]])).abs().max()
    ) <= (task.delta + 1e-6)


def test_reliance_is_the_share_of_two_cue_predictions() -> None:
    assert Reliance(0.9, 30, 10, 50).reliance == pytest.approx(0.25)
    assert Reliance(0.9, 0, 0, 50).reliance != Reliance(0.9, 0, 0, 50).reliance  # NaN


@pytest.mark.parametrize(("field", "value"), [("p_robust", 1.5), ("delta", 0.0), ("size", 2)])
def test_bad_task_is_a_config_error(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        TwoCueTask(**{field: value})


def test_standard_model_mixes_cues_and_adversarial_training_drops_the_imperceptible_one() -> None:
    # the experiment's defaults (2000 training images, 600 steps): at 300 steps on 1500 images
    # the undefended model has not yet picked up the imperceptible cue (reliance 0)
    task = TwoCueTask()
    settings = TrainSettings(steps=600)
    std = measure_reliance(task, Standard(), settings, seed=0)
    at = measure_reliance(task, AdversarialTraining(), settings, seed=0)
    # the undefended model learns the task and follows each cue in some conflicts
    assert std.clean_accuracy > 0.8
    assert 0.05 < std.reliance < 0.95
    # AT's radius (0.05) exceeds the imperceptible cue (0.015): it stops following it
    assert at.reliance < std.reliance - 0.1
    assert at.clean_accuracy > 0.7


def test_experiment_rows_train_on_the_cpu_whatever_the_default_device() -> None:
    """``atat-privacy`` runs under ``torch.device(cfg.device)``; the two-cue models stay on the
    CPU (their draws use CPU generators). A 'meta' default device stands in for a GPU here."""
    cfg = AtatPrivacyConfig(reliance_seeds=2)
    spec = model_spec("mlp", input_shape=(1, 4, 4), hidden=[8], out_dim=2)  # not used by the task
    models = [
        ("standard", "standard", Recipe("standard", spec, Standard(), TrainSettings(steps=3)))
    ]
    with torch.device("meta"):
        rows = reliance_rows(cfg, models, SimpleNamespace(cache=None))  # type: ignore[arg-type]
    assert [(r.target, r.seed) for r in rows] == [("standard", 0), ("standard", 1)]
    assert all(r.n == TwoCueTask().n_eval for r in rows)
