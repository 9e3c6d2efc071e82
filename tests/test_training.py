"""Models and the training loop: every optimizer trains, checks give clear errors."""

from __future__ import annotations

import pytest
import torch

from trainleak.errors import ConfigError, ShapeError
from trainleak.experiments import parse_config
from trainleak.models import build_model, model_spec
from trainleak.systems.training import TrainConfig, train, train_checkpoint


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(32, 1, 4, 4, generator=gen)
    y = (x.flatten(1)[:, :3].sum(1) > 0).long()
    return x, y


@pytest.mark.parametrize(
    ("optimizer", "lr"),
    [("gd", 0.5), ("sgd", 0.2), ("adam", 0.01), ("muon", 0.05), ("signum", 0.01)],
)
def test_each_optimizer_fits_separable_data(optimizer: str, lr: float) -> None:
    x, y = _data()
    spec = model_spec("homogeneous_mlp", input_shape=(1, 4, 4), hidden=[64], out_dim=1)
    batch = 16 if optimizer == "sgd" else None
    cfg = TrainConfig(optimizer=optimizer, lr=lr, steps=300, batch_size=batch, log_every=50)
    ckpt, hist = train_checkpoint(spec, x, y, cfg)
    assert hist.loss[-1] < 0.5 * hist.loss[0]
    assert hist.min_margin[-1] > 0, f"{optimizer} did not separate the data"
    assert ckpt.optimizer is not None and ckpt.optimizer.name == optimizer
    assert ckpt.initial is not None
    assert not torch.equal(ckpt.initial["layers.0.weight"], ckpt.final["layers.0.weight"])


def test_adam_records_epsilon() -> None:
    x, y = _data()
    spec = model_spec("homogeneous_mlp", input_shape=(1, 4, 4), hidden=[16], out_dim=1)
    ckpt, _ = train_checkpoint(spec, x, y, TrainConfig(optimizer="adam", eps=1e-16, steps=5))
    assert ckpt.optimizer is not None and ckpt.optimizer.params["eps"] == 1e-16


def test_cross_entropy_multiclass_and_convnet() -> None:
    x, _ = _data()
    y = torch.arange(32) % 3
    model = build_model(model_spec("convnet", input_shape=(1, 4, 4), out_dim=3, width=4), seed=0)
    hist = train(
        model, x, y, TrainConfig(optimizer="adam", lr=0.01, steps=200, loss="cross_entropy")
    )
    assert hist.loss[-1] < hist.loss[0]


def test_homogeneity_of_bias_free_mlp() -> None:
    spec = model_spec("homogeneous_mlp", input_shape=(6,), hidden=[5, 7], out_dim=2)
    model = build_model(spec, seed=0)
    x = torch.randn(4, 6)
    out = model(x)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)
    torch.testing.assert_close(model(x), out * 8.0)


def test_seeded_init_does_not_touch_global_rng() -> None:
    spec = model_spec("mlp", input_shape=(3,), hidden=[4], out_dim=1)
    state = torch.random.get_rng_state()
    a = build_model(spec, seed=5).state_dict()
    b = build_model(spec, seed=5).state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_bad_inputs_give_clear_errors() -> None:
    x, y = _data()
    spec = model_spec("homogeneous_mlp", input_shape=(1, 4, 4), hidden=[4], out_dim=1)
    model = build_model(spec, seed=0)
    with pytest.raises(ShapeError, match="samples"):
        train(model, x, y[:5], TrainConfig(steps=1))
    with pytest.raises(ConfigError, match="labels in"):
        train(model, x, y + 3, TrainConfig(steps=1))
    with pytest.raises(ConfigError, match="architecture.kind"):
        build_model(model_spec("resnet999"))
    with pytest.raises(ConfigError, match="init_scale"):
        build_model(model_spec("homogeneous_mlp", input_shape=(3,), hidden=[2], init_scale=-1.0))


def test_config_errors_name_field_expectation_and_value() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(TrainConfig, {"lr": -1.0})
    msg = str(err.value)
    assert "lr" in msg and "greater than 0" in msg and "-1.0" in msg
    with pytest.raises(ConfigError, match="unknown config field 'lrr'"):
        parse_config(TrainConfig, {"lrr": 1.0})
