"""Model inversion on digits (8x8, classes 0-4 private, 5-9 public): the attacks beat the
prior-only baseline and chance, and every training-time defense changes what it should."""

from __future__ import annotations

import dataclasses
from functools import cache, lru_cache

import pytest
import torch

from trainleak.attacks.inversion import AdaptiveInversion, GenerativeInversion, PriorOnly
from trainleak.data import load_digits
from trainleak.errors import ConfigError
from trainleak.metrics.inversion import attack_accuracy, feature_hsic, robustness_profile
from trainleak.models.fitting import accuracy
from trainleak.models.registry import model_spec
from trainleak.releases.classifier import ClassifierRelease
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.classifier import (
    ATAT,
    MID,
    AdversarialTraining,
    BiDO,
    Defense,
    MixUp,
    NegativeLabelSmoothing,
    PriorSettings,
    Standard,
    TrainSettings,
    TransferFreeze,
    train_classifier,
    train_prior,
)

CLASSES = tuple("01234")
BOX = (0.0, 1.0)


@lru_cache(maxsize=1)
def _split() -> tuple[torch.Tensor, ...]:
    ds = load_digits()
    priv, pub = ds.y < 5, ds.y >= 5
    x, y = ds.x[priv], ds.y[priv]
    return x[:700], y[:700], x[700:], y[700:], ds.x[pub], ds.y[pub] - 5


def _mlp(hidden: list[int] | None = None) -> object:
    return model_spec("mlp", input_shape=(1, 8, 8), hidden=hidden or [64, 64], out_dim=5)


@cache
def _train(defense: Defense, steps: int = 300, kind: str = "mlp") -> ClassifierRelease:
    x, y, _, _, px, py = _split()
    spec = (
        model_spec("mid_mlp", input_shape=(1, 8, 8), hidden=[64, 64], out_dim=5)
        if kind == "mid"
        else _mlp()
    )
    return train_classifier(
        x,
        y,
        CLASSES,
        spec,
        defense=defense,
        settings=TrainSettings(steps=steps),
        seed=0,
        public=(px, py),
    ).release  # type: ignore[arg-type]


@lru_cache(maxsize=1)
def _setting() -> tuple[ClassifierRelease, Knowledge, torch.nn.Module]:
    x, y, _, _, px, py = _split()
    prior = train_prior(
        px, PriorSettings(latent_dim=8, hidden=(64, 128), steps=800), public_classes=tuple("56789")
    )
    know = Knowledge(
        input_shape=(1, 8, 8), value_range=BOX, auxiliary=(px, py), generative_prior=prior
    )
    ev_spec = model_spec("convnet", input_shape=(1, 8, 8), out_dim=5, width=8)
    evaluator = train_classifier(
        x, y, CLASSES, ev_spec, settings=TrainSettings(steps=300), seed=3
    ).release.model()
    return _train(Standard()), know, evaluator


def _three_attacks(
    target: ClassifierRelease, know: Knowledge, evaluator: torch.nn.Module
) -> dict[str, float]:
    """Acc@1 of prior-only, the standard and the adaptive attack on a small candidate pool (the
    same for all three, so that selection alone cannot do it)."""
    common = {"candidates": 24, "keep": 8, "final": 8, "selection_transforms": 4}
    accs = {}
    for atk in (
        PriorOnly(candidates=24, final=8, selection_transforms=4),
        GenerativeInversion(steps=40, **common),  # type: ignore[arg-type]
        AdaptiveInversion(steps=40, model_augment=0, restarts=1, **common),  # type: ignore[arg-type]
    ):
        rec = atk(target, know, seed=1)
        assert rec.labels is not None and rec.inputs.shape == (40, 1, 8, 8)
        accs[atk.name] = attack_accuracy(evaluator, rec.inputs, rec.labels, 5).acc1
    return accs


def test_attacks_beat_the_prior_only_baseline_and_chance() -> None:
    accs = _three_attacks(*_setting())
    print(accs)
    # the adaptive attack beats the prior-only baseline at equal candidate budget, and both
    # optimising attacks beat chance (0.2) by a wide margin
    assert accs["mi-standard"] >= accs["mi-prior-only"] + 0.15, accs
    assert accs["mi-adaptive"] >= accs["mi-prior-only"] + 0.15, accs
    assert min(accs["mi-standard"], accs["mi-adaptive"]) >= 0.2 + 0.3, accs


def test_model_augmentation_trains_students_and_still_inverts() -> None:
    target, know, evaluator = _setting()
    rec = AdaptiveInversion(
        candidates=60, keep=2, steps=30, final=2, model_augment=1, selection_transforms=2
    )(target, know, seed=2)
    assert rec.labels is not None
    assert attack_accuracy(evaluator, rec.inputs, rec.labels, 5).acc1 >= 0.5


def _robust(release: ClassifierRelease, eps: float = 0.1) -> float:
    _, _, tx, ty, _, _ = _split()
    return robustness_profile(release.model(), tx, ty, [eps], box=BOX).accuracy[0]


def test_at_raises_and_atat_lowers_robust_accuracy() -> None:
    std, at = _train(Standard()), _train(AdversarialTraining(eps=0.1, step=0.025))
    atat = _train(ATAT(eps=0.02, step=0.004, weight=1.0))
    r_std, r_at, r_atat = _robust(std), _robust(at), _robust(atat)
    assert r_at >= r_std + 0.1, (r_std, r_at)  # measured 0.64 -> 0.79 at eps 0.1
    assert r_atat <= r_std - 0.3, (r_std, r_atat)  # measured 0.64 -> 0.0
    _, _, tx, ty, _, _ = _split()
    # at weight 1 on digits AT-AT costs clean accuracy (measured 0.915 -> 0.851)
    assert accuracy(atat.model(), tx, ty) >= accuracy(std.model(), tx, ty) - 0.1


def _confidence(release: ClassifierRelease) -> float:
    _, _, tx, _, _, _ = _split()
    with torch.no_grad():
        return float(torch.softmax(release.model()(tx), 1).max(1).values.mean())


def test_each_defense_trains_and_changes_what_it_should() -> None:
    _, _, tx, ty, _, _ = _split()
    std = _train(Standard())
    for d in (MixUp(), NegativeLabelSmoothing(), BiDO(), TransferFreeze(pretrain_steps=200)):
        assert accuracy(_train(d).model(), tx, ty) >= 0.85, d
    # MixUp softens the outputs; negative label smoothing sharpens them
    assert _confidence(_train(MixUp())) <= _confidence(std) - 0.03
    assert _confidence(_train(NegativeLabelSmoothing(alpha=-0.5))) >= _confidence(std)
    # BiDO's input penalty lowers HSIC(X, Z) (measured 0.0195 -> 0.0128 at lambda_x 5)
    hx, _ = feature_hsic(std.model(), tx[:200], ty[:200], 5)
    bx, _ = feature_hsic(_train(BiDO(lambda_x=5.0, lambda_y=0.5)).model(), tx[:200], ty[:200], 5)
    assert bx <= 0.8 * hx, (hx, bx)
    mid = _train(MID(beta=0.01), kind="mid")
    assert accuracy(mid.model(), tx, ty) >= 0.8


def test_transfer_freezing_keeps_the_pretrained_layers() -> None:
    x, y, _, _, px, py = _split()
    tl = TransferFreeze(frozen=1, pretrain_steps=100)
    none = train_classifier(
        x, y, CLASSES, _mlp(), defense=tl, settings=TrainSettings(steps=1), seed=0, public=(px, py)
    ).release  # type: ignore[arg-type]
    some = train_classifier(
        x, y, CLASSES, _mlp(), defense=tl, settings=TrainSettings(steps=50), seed=0, public=(px, py)
    ).release  # type: ignore[arg-type]
    assert torch.equal(none.state["layers.0.weight"], some.state["layers.0.weight"])
    assert not torch.equal(none.state["layers.1.weight"], some.state["layers.1.weight"])
    with pytest.raises(ConfigError, match="public data"):
        train_classifier(x, y, CLASSES, _mlp(), defense=tl, settings=TrainSettings(steps=1))
    with pytest.raises(ConfigError, match="mid_mlp"):
        train_classifier(x, y, CLASSES, _mlp(), defense=MID(), settings=TrainSettings(steps=1))


def test_memorising_and_drop_layer_models() -> None:
    x, y, _, _, _, _ = _split()
    mem = train_classifier(x, y, CLASSES, _mlp(), settings=TrainSettings(steps=1500), seed=0)
    assert mem.train_accuracy == 1.0
    spec = model_spec("masked_mlp", input_shape=(1, 8, 8), hidden=[32], out_dim=5, keep=0.1)
    drop = train_classifier(x, y, CLASSES, spec, settings=TrainSettings(steps=100)).release
    model = drop.model()
    seen = torch.zeros(64, dtype=torch.bool)
    seen[model.index] = True  # type: ignore[index]
    z = x[:5].clone().flatten(1)
    z[:, ~seen] = torch.rand(5, int((~seen).sum()))
    with torch.no_grad():
        assert torch.equal(model(x[:5]), model(z.view(5, 1, 8, 8)))
    assert int(seen.sum()) == 6


def test_attacks_with_a_gan_prior_beat_its_prior_only_baseline_and_chance() -> None:
    """The attacks read a GAN prior (the convolutional generator) as they read the VAE: on the
    same target and budget as above they beat prior-only samples of that GAN and chance.
    Measured with prior seeds 0 / 1 / 2: standard 0.825 / 0.675 / 0.725, adaptive 0.950 /
    0.650 / 0.825, prior-only 0.475 / 0.425 / 0.500."""
    target, know, evaluator = _setting()
    _, _, _, _, px, _ = _split()
    settings = PriorSettings(kind="gan", latent_dim=8, steps=600, channels=16, d_channels=8)
    gan = train_prior(px, settings, public_classes=tuple("56789"), seed=0)
    accs = _three_attacks(target, dataclasses.replace(know, generative_prior=gan), evaluator)
    assert accs["mi-standard"] >= accs["mi-prior-only"] + 0.15, accs
    assert accs["mi-adaptive"] >= accs["mi-prior-only"] + 0.15, accs
    assert min(accs["mi-standard"], accs["mi-adaptive"]) >= 0.2 + 0.3, accs
