"""The convolutional VAE prior, the adaptive attack's latent-prior and robust-selection switches,
and the device option of the model-inversion experiments (issue 12, second pass)."""

from __future__ import annotations

from functools import lru_cache

import pytest
import torch

from trainleak.attacks.inversion import AdaptiveInversion, GenerativeInversion
from trainleak.attacks.inversion._latent import noisy
from trainleak.data import load_digits
from trainleak.errors import ConfigError
from trainleak.experiments import get_experiment
from trainleak.models.generative import ConvVAEDecoder
from trainleak.models.registry import build_model, model_spec
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.inversion import InversionTask
from trainleak.systems.classifier import PriorSettings, TrainSettings, train_classifier, train_prior
from trainleak.systems.classifier.prior import diff_augment


def _digits() -> tuple[torch.Tensor, ...]:
    ds = load_digits()
    priv, pub = ds.y < 5, ds.y >= 5
    return ds.x[priv][:500], ds.y[priv][:500], ds.x[pub], ds.y[pub] - 5


@pytest.mark.parametrize("shape", [(1, 32, 32), (1, 28, 28), (3, 8, 8), (1, 12, 20)])
def test_conv_decoder_produces_images_of_the_declared_shape_and_range(
    shape: tuple[int, int, int],
) -> None:
    dec = ConvVAEDecoder(6, shape, channels=16, low=-1.0, high=1.0)
    with torch.no_grad():
        out = dec(torch.randn(5, 6))
    assert out.shape == (5, *shape)
    assert float(out.min()) >= -1.0 and float(out.max()) <= 1.0
    with pytest.raises(ConfigError, match="channels"):
        ConvVAEDecoder(6, (1, 32, 32), channels=4)


def test_conv_prior_learns_the_public_images_and_flip_mirrors_them() -> None:
    _, _, px, _ = _digits()
    # trained 150 steps, the conv VAE reconstructs public digits far better than untrained
    prior = train_prior(px, PriorSettings(latent_dim=8, steps=150, channels=16), seed=0)
    assert prior.spec.kind == "vae_conv_decoder"
    spec = model_spec("vae", latent_dim=8, input_shape=(1, 8, 8), hidden=(256, 512), channels=16)
    fresh = build_model(spec, seed=0).decoder
    mean = px.mean(0, keepdim=True)
    with torch.no_grad():
        z = torch.randn(400, 8, generator=torch.Generator().manual_seed(0))
        trained_gap = (prior.decoder()(z).mean(0, keepdim=True) - mean).abs().mean()
        fresh_gap = (fresh(z).mean(0, keepdim=True) - mean).abs().mean()
    assert float(trained_gap) < 0.5 * float(fresh_gap)
    # a prior trained on mirrored copies too is a different prior (flip reaches the loss)
    flipped = train_prior(px, PriorSettings(latent_dim=8, steps=20, channels=16, flip=True))
    plain = train_prior(px, PriorSettings(latent_dim=8, steps=20, channels=16))
    assert any(not torch.equal(flipped.state[k], plain.state[k]) for k in plain.state)


@lru_cache(maxsize=1)
def _attack_setting() -> tuple[object, Knowledge]:
    x, y, px, py = _digits()
    prior = train_prior(px, PriorSettings(latent_dim=8, hidden=(64, 128), steps=300))
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[64, 64], out_dim=5)
    target = train_classifier(x, y, tuple("01234"), spec, settings=TrainSettings(steps=200))
    know = Knowledge(
        input_shape=(1, 8, 8), value_range=(0.0, 1.0), auxiliary=(px, py), generative_prior=prior
    )
    return target.release, know


def test_latent_regulariser_keeps_latents_near_the_prior_mass() -> None:
    release, know = _attack_setting()
    common = {"candidates": 30, "keep": 2, "final": 2, "steps": 30, "lr": 0.2}
    rec = {}
    for reg in (0.0, 1.0):
        atk = GenerativeInversion(loss="margin", latent_reg=reg, **common)  # type: ignore[arg-type]
        rec[reg] = atk(release, know, seed=3)
    # the trace logs the loss: with the prior term the optimised loss includes |z|^2 / 2 > 0,
    # and the images move less far from the decoder's typical output
    assert rec[1.0].trace[-1]["loss"] > rec[0.0].trace[-1]["loss"]
    dec = know.generative_prior.decoder()  # type: ignore[union-attr]
    with torch.no_grad():
        typical = dec(torch.zeros(1, 8))
    far = {k: float((r.inputs - typical).abs().mean()) for k, r in rec.items()}
    assert far[1.0] < far[0.0], far


def test_robust_selection_scores_with_the_students() -> None:
    release, know = _attack_setting()
    common = {"candidates": 30, "keep": 4, "final": 2, "steps": 5, "model_augment": 1}
    a = AdaptiveInversion(restarts=1, robust_select=False, **common)(release, know, seed=4)  # type: ignore[arg-type]
    b = AdaptiveInversion(restarts=1, robust_select=True, **common)(release, know, seed=4)  # type: ignore[arg-type]
    # same search (same seed), different final judge: the scores differ
    assert not torch.allclose(a.scores, b.scores)  # type: ignore[arg-type]


def test_device_option_is_validated_and_tasks_move() -> None:
    exp = get_experiment("atat-privacy")
    assert exp.make_config({"device": "cpu"}).device == "cpu"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="device"):
        exp.make_config({"device": "gpu0"})
    adaptive = get_experiment("model-inversion-adaptive")
    cfg = adaptive.make_config({"atat_weight": 1.0, "atat_eps": 0.02, "prior_channels": 32})
    assert (cfg.atat_weight, cfg.atat_eps, cfg.prior_channels) == (1.0, 0.02, 32)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="atat_eps"):
        adaptive.make_config({"atat_eps": 0.0})
    t = torch.zeros(2, 1, 4, 4)
    y = torch.zeros(2, dtype=torch.long)
    task = InversionTask("x", (t, y), (t, y), (t, y), ("a", "b"), ("c", "d"))
    moved = task.to("cpu")
    assert moved.private[0].device.type == "cpu" and moved.content_hash() == task.content_hash()


def test_noise_switch_adds_gaussian_noise_to_the_views() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.full((200, 1, 8, 8), 0.5)
    assert noisy(x, 0.0, gen) is x
    out = noisy(x, 0.1, gen)
    assert abs(float((out - x).std()) - 0.1) < 0.01 and abs(float((out - x).mean())) < 0.01
    release, know = _attack_setting()
    common = {"candidates": 30, "keep": 2, "final": 2, "steps": 10}
    plain = GenerativeInversion(**common)(release, know, seed=5)  # type: ignore[arg-type]
    smooth = GenerativeInversion(noise=0.1, **common)(release, know, seed=5)  # type: ignore[arg-type]
    assert not torch.equal(plain.inputs, smooth.inputs)
    with pytest.raises(ConfigError, match="noise"):
        GenerativeInversion(noise=-0.1)


def test_students_only_search_needs_students_and_differs_from_the_joint_search() -> None:
    with pytest.raises(ConfigError, match="target_weight"):
        GenerativeInversion(target_weight=0.0)
    release, know = _attack_setting()
    common = {"candidates": 30, "keep": 2, "final": 2, "steps": 10, "model_augment": 1}
    joint = AdaptiveInversion(restarts=1, **common)(release, know, seed=6)  # type: ignore[arg-type]
    alone = AdaptiveInversion(restarts=1, target_weight=0.0, **common)(release, know, seed=6)  # type: ignore[arg-type]
    assert not torch.equal(joint.inputs, alone.inputs)


def test_gan_prior_moves_its_samples_toward_the_public_images() -> None:
    """A few hundred hinge-GAN steps bring the generator's sample mean far closer to the public
    images' mean than the untrained generator's (the same latents), and the release is the
    convolutional decoder kind the attacks already read."""
    _, _, px, _ = _digits()
    settings = PriorSettings(kind="gan", latent_dim=8, steps=300, channels=16, d_channels=8)
    seen: list[tuple[str, int, int]] = []
    prior = train_prior(px, settings, seed=0, progress=lambda *a: seen.append(a))
    assert seen[0] == ("prior", 0, 300) and seen[-1] == ("prior", 300, 300) and len(seen) == 7
    assert prior.spec.kind == "vae_conv_decoder" and prior.latent_dim == 8
    fresh = build_model(prior.spec, seed=0)
    mean = px.mean(0, keepdim=True)
    with torch.no_grad():
        z = torch.randn(400, 8, generator=torch.Generator().manual_seed(0))
        out = prior.decoder()(z)
        trained_gap = (out.mean(0, keepdim=True) - mean).abs().mean()
        fresh_gap = (fresh(z).mean(0, keepdim=True) - mean).abs().mean()
    assert float(trained_gap) < 0.5 * float(fresh_gap)
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    # the same seed gives the same generator
    again = train_prior(px, PriorSettings(kind="gan", latent_dim=8, steps=5, channels=16), seed=3)
    twice = train_prior(px, PriorSettings(kind="gan", latent_dim=8, steps=5, channels=16), seed=3)
    assert all(torch.equal(again.state[k], twice.state[k]) for k in again.state)


def test_gan_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="channels"):
        PriorSettings(kind="gan")
    with pytest.raises(ConfigError, match="kind"):
        PriorSettings(kind="flow", channels=16)


def test_diff_augment_shifts_whole_images_and_passes_gradients() -> None:
    x = torch.rand(6, 2, 8, 8, requires_grad=True)
    out = diff_augment(x, torch.Generator().manual_seed(0), translate=0.25, flip=True, span=1.0)
    assert out.shape == x.shape
    out.sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0
    # on a ramp image (value 8 r + c) a shift keeps the interior a ramp: one pixel right is
    # one contrast unit more, one pixel down eight; the shift itself varies between images
    img = torch.arange(64.0).view(1, 1, 8, 8).repeat(40, 1, 1, 1)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        moved = diff_augment(img, gen, translate=0.25, flip=False, span=0.0)
    starts = set()
    for a in moved[:, 0]:
        unit = float(a[4, 5] - a[4, 4])
        assert 0.75 - 1e-5 <= unit <= 1.25 + 1e-5
        assert float(a[5, 4] - a[4, 4]) == pytest.approx(8 * unit, rel=1e-4)
        starts.add(round(float(a[4, 4] - a.mean()) / unit, 2))
    assert len(starts) > 5
    # no shift, no mirror, no jitter range used: the contrast map is affine per image
    with torch.no_grad():
        same = diff_augment(img[:3], gen, translate=0.0, flip=False, span=0.0)
    for a, b in zip(same, img[:3]):
        unit = float(a[0, 0, 1] - a[0, 0, 0])
        assert torch.allclose(a - a.mean(), unit * (b - b.mean()), atol=1e-4)
