"""Federated simulation: the GradientUpdate release, clients, imprint layers, defenses."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from release_fixtures import tiny_honest_update, tiny_malicious_update
from trainleak.attacks.gradient._common import tiny_batch
from trainleak.attacks.gradient.layout import detect_layout
from trainleak.defenses import chain
from trainleak.defenses.gradient import ClipNorm, GaussianNoise, Quantize
from trainleak.errors import ConfigError, ReleaseTypeError, ShapeError, UnsafeFileError
from trainleak.models import build_model, model_spec
from trainleak.models.functional import instantiate, per_sample_gradients
from trainleak.releases import Checkpoint
from trainleak.releases.federated import GradientUpdate
from trainleak.systems.federated import Client, fedavg_update, fedsgd_update
from trainleak.systems.federated.malicious import malicious_mlp

SPEC = model_spec("mlp", input_shape=(12,), hidden=[16], out_dim=3)


def _params() -> dict[str, torch.Tensor]:
    return {k: v.double() for k, v in build_model(SPEC, seed=1).state_dict().items()}


def test_fedsgd_update_is_the_mean_of_per_sample_gradients() -> None:
    x, y = tiny_batch(7, 12, seed=0)
    upd = fedsgd_update(SPEC, _params(), x, y)
    per = per_sample_gradients(instantiate(SPEC, _params()), x, y)
    for name, g in upd.update.items():
        torch.testing.assert_close(g, per[name].mean(0), rtol=0, atol=1e-14)
    assert upd.batch_size == 7 and upd.kind == "gradient" and upd.dtype == torch.float64


def test_fedavg_with_one_step_is_lr_times_the_gradient() -> None:
    x, y = tiny_batch(5, 12, seed=1)
    grad = fedsgd_update(SPEC, _params(), x, y).update
    avg = fedavg_update(SPEC, _params(), x, y, local_steps=1, learning_rate=0.5)
    for name, g in grad.items():
        torch.testing.assert_close(avg.update[name], 0.5 * g, rtol=0, atol=1e-14)
    three = Client(x, y, local_steps=3, learning_rate=0.5).respond(SPEC, _params())
    assert three.kind == "delta" and three.local_steps == 3
    assert not torch.allclose(three.update["layers.0.bias"], avg.update["layers.0.bias"])


def test_update_shape_mismatch_names_the_entry() -> None:
    p = _params()
    bad = {k: v.clone() for k, v in p.items()}
    bad["layers.0.weight"] = torch.zeros(16, 11, dtype=torch.float64)
    with pytest.raises(ShapeError, match=r"layers\.0\.weight.*\(16, 11\).*\(16, 12\)"):
        GradientUpdate(SPEC, p, bad, batch_size=2)


def test_parameters_must_fit_the_architecture() -> None:
    other = model_spec("mlp", input_shape=(12,), hidden=[8], out_dim=3)
    with pytest.raises(ShapeError, match="architecture 'mlp' expects"):
        GradientUpdate(other, _params(), _params(), batch_size=2)


@pytest.mark.parametrize("value, word", [(float("nan"), "1 NaN"), (float("inf"), "1 infinite")])
def test_non_finite_updates_are_refused(value: float, word: str) -> None:
    p = _params()
    bad = {k: v.clone() for k, v in p.items()}
    bad["layers.1.bias"][0] = value
    with pytest.raises(ConfigError, match=rf"layers\.1\.bias.*finite values.*{word}"):
        GradientUpdate(SPEC, p, bad, batch_size=2)


def test_bad_counts_are_refused() -> None:
    p = _params()
    with pytest.raises(ConfigError, match="batch_size"):
        GradientUpdate(SPEC, p, p, batch_size=0)
    with pytest.raises(ConfigError, match="learning_rate"):
        GradientUpdate(SPEC, p, p, local_steps=2)


def test_save_load_and_exported_files_round_trip(tmp_path: Path) -> None:
    upd, _ = tiny_honest_update()
    back = GradientUpdate.load(upd.save(tmp_path / "u"))
    assert back.batch_size == upd.batch_size and back.architecture == upd.architecture
    for k in upd.update:
        assert torch.equal(back.update[k], upd.update[k])
    save_file(upd.parameters, str(tmp_path / "p.safetensors"))
    torch.save(upd.update, tmp_path / "g.pt")
    exported = GradientUpdate.from_files(
        upd.architecture, tmp_path / "p.safetensors", tmp_path / "g.pt", batch_size=4
    )
    assert torch.equal(exported.update["layers.0.weight"], upd.update["layers.0.weight"])


def test_pickled_exports_are_refused(tmp_path: Path) -> None:
    upd, _ = tiny_honest_update()
    torch.save({"grads": upd.update["layers.0.bias"], "hook": print}, tmp_path / "g.pt")
    with pytest.raises(UnsafeFileError, match="unpickle"):
        GradientUpdate.from_files(upd.architecture, tmp_path / "g.pt", tmp_path / "g.pt")


def test_imprint_layout_is_read_from_the_weights() -> None:
    public, _ = tiny_batch(300, 12, seed=5)
    _, p = malicious_mlp((12,), 3, public, n_groups=4, bins_per_group=6, hidden=8)
    layout = detect_layout(p["layers.0.weight"], p["layers.0.bias"], p["layers.1.weight"])
    assert layout.n_imprint_groups == 4
    assert sorted(int(g.numel()) for g in layout.groups) == [6, 6, 6, 6]
    for t in layout.thresholds:
        assert bool((t[1:] > t[:-1]).all())
    s = public.double() @ p["layers.0.weight"][layout.groups[0][0]]
    t = layout.thresholds[0]
    assert float(t[0]) < float(s.min())  # every sample fires the lowest neuron
    assert float(s.min()) < float(t[1]) and float(t[-1]) < float(s.max())


def test_honest_or_tampered_layers_are_refused_by_layout_detection() -> None:
    honest = _params()
    with pytest.raises(ConfigError, match="honest first layer"):
        detect_layout(honest["layers.0.weight"], honest["layers.0.bias"], torch.ones(3, 16))
    public, _ = tiny_batch(100, 12, seed=5)
    _, p = malicious_mlp((12,), 3, public, n_groups=2, bins_per_group=4, hidden=8)
    w1 = p["layers.1.weight"].clone()
    w1[0, 1] += 0.5
    with pytest.raises(ConfigError, match="equal outgoing weights"):
        detect_layout(p["layers.0.weight"], p["layers.0.bias"], w1)


def test_defenses_transform_only_the_update_and_compose() -> None:
    upd, _ = tiny_malicious_update()
    gen = torch.Generator().manual_seed(0)
    noisy = GaussianNoise(1e-3)(upd, gen)
    again = GaussianNoise(1e-3)(upd, torch.Generator().manual_seed(0))
    assert torch.equal(noisy.update["layers.0.bias"], again.update["layers.0.bias"])
    assert noisy.parameters is upd.parameters
    clipped = ClipNorm(1e-3)(upd, gen)
    total = sum(float((v**2).sum()) for v in clipped.update.values()) ** 0.5
    assert total == pytest.approx(1e-3, rel=1e-9)
    q = Quantize(3)(upd, gen)
    for name, v in q.update.items():
        assert torch.unique(v).numel() <= 2**3 - 1, name
    both = chain(ClipNorm(1.0), Quantize(4))(upd, gen)
    assert torch.unique(both.update["layers.0.bias"]).numel() <= 15
    assert "ClipNorm" in repr(chain(ClipNorm(1.0), Quantize(4)))


def test_defenses_refuse_bad_input() -> None:
    with pytest.raises(ConfigError, match="bits"):
        Quantize(0)
    with pytest.raises(ConfigError, match="sigma"):
        GaussianNoise(-1.0)
    ckpt = Checkpoint(architecture=SPEC, final=_params())
    with pytest.raises(ReleaseTypeError, match="GradientUpdate"):
        ClipNorm(1.0)(ckpt, torch.Generator())
    upd, _ = tiny_honest_update()
    assert dataclasses.replace(upd, batch_size=3).batch_size == 3
