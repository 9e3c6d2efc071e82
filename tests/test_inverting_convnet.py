"""Inverting Gradients on breaching's BatchNorm ConvNet (issue 11): the model, the objective,
the options, and a fixed-seed run against a baseline."""

from __future__ import annotations

import pytest
import torch

from trainleak.attacks.gradient._common import release_model
from trainleak.attacks.gradient._objectives import GradientDistance, candidate_gradient
from trainleak.attacks.gradient.inverting import InvertingGradients, _CosineObjective
from trainleak.errors import ConfigError
from trainleak.metrics.image import psnr
from trainleak.models import ConvNetBN, build_model, model_spec
from trainleak.models.functional import state_of
from trainleak.releases import Knowledge
from trainleak.releases.federated import GradientUpdate
from trainleak.systems.federated import fedsgd_update

SHAPE = (1, 12, 12)


def small_release(
    bn_mode: str, batch: int = 1, width: int = 4, seed: int = 0
) -> tuple[GradientUpdate, torch.Tensor, torch.Tensor]:
    """A float64 FedSGD gradient of a small ConvNetBN on bar images with a little noise."""
    spec = model_spec("convnet_bn", input_shape=SHAPE, out_dim=4, width=width, bn_mode=bn_mode)
    params = {k: v.double() for k, v in state_of(build_model(spec, seed=0)).items()}
    gen = torch.Generator().manual_seed(seed)
    x = 0.1 * torch.rand(batch, *SHAPE, generator=gen, dtype=torch.float64)
    for i in range(batch):
        x[i, 0, 2 + i : 9 + i, 4 + 2 * i : 6 + 2 * i] += 0.9
    y = torch.arange(batch) % 4
    return fedsgd_update(spec, params, x, y), x, y


def test_convnet_bn_has_the_reference_size_and_no_buffers() -> None:
    cifar, mnist = ConvNetBN((3, 32, 32), 10), ConvNetBN((1, 28, 28), 10)
    assert sum(p.numel() for p in cifar.parameters()) == 187_114
    assert sum(p.numel() for p in mnist.parameters()) == 186_826
    assert not list(cifar.buffers())
    assert cifar(torch.rand(2, 3, 32, 32)).shape == (2, 10)


def test_convnet_bn_modes_differ_as_batchnorm_does() -> None:
    torch.manual_seed(0)
    x = torch.rand(3, *SHAPE)
    train = ConvNetBN(SHAPE, 4, width=2, bn_mode="train")
    evalm = ConvNetBN(SHAPE, 4, width=2, bn_mode="eval")
    evalm.load_state_dict(train.state_dict())
    # train mode: an image's output depends on the rest of the batch; eval mode: it does not
    assert not torch.allclose(train(x)[:1], train(x[:1]), atol=1e-4)
    assert torch.allclose(evalm(x)[:1], evalm(x[:1]), atol=1e-6)
    assert not torch.allclose(train(x), evalm(x), atol=1e-3)


@pytest.mark.parametrize(
    "kwargs",
    [{"bn_mode": "frozen"}, {"input_shape": (1, 8, 8)}, {"width": 0}, {"input_shape": (8, 8)}],
)
def test_convnet_bn_refuses_bad_configurations(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"input_shape": SHAPE, "out_dim": 4, **kwargs}
    with pytest.raises(ConfigError):
        ConvNetBN(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize("bn_mode", ["train", "eval"])
def test_cosine_objective_equals_the_gradient_distance(bn_mode: str) -> None:
    upd, x, y = small_release(bn_mode, batch=2)
    model = release_model(upd)
    z = torch.rand(2, *SHAPE, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    target = [upd.update[k] for k, _ in model.named_parameters()]
    want = GradientDistance("cosine")(candidate_gradient(model, z, y), target)
    got = _CosineObjective(model, upd, y)(z)
    assert abs(float(got.detach()) - float(want.detach())) < 1e-12
    assert float(_CosineObjective(model, upd, y)(x).detach()) < 1e-12  # the truth matches
    per_tensor = _CosineObjective(model, upd, y, per_tensor=True)
    assert float(per_tensor(x).detach()) < 1e-12 < float(per_tensor(z).detach())


def test_channels_last_computes_the_same_iterates() -> None:
    upd, _, y = small_release("train")
    kn = Knowledge(input_shape=SHAPE, value_range=(0.0, 1.0), labels=y)
    runs = [
        InvertingGradients(iterations=4, signed=False, lr=0.01, channels_last=cl)(upd, kn, seed=1)
        for cl in (False, True)
    ]
    assert runs[0].inputs.is_contiguous() and runs[1].inputs.is_contiguous()
    assert torch.allclose(runs[0].inputs, runs[1].inputs, atol=1e-9)


def test_prior_mean_init_needs_a_prior() -> None:
    upd, _, y = small_release("eval")
    kn = Knowledge(input_shape=SHAPE, value_range=(0.0, 1.0), labels=y)
    with pytest.raises(ConfigError, match="prior"):
        InvertingGradients(iterations=2, init="prior-mean")(upd, kn)


def test_inverting_gradients_recovers_an_image_through_the_convnet() -> None:
    """Width 8, eval-mode BatchNorm, B = 1, labels given, fixed seed: the attack ends far
    closer to the image than its own uniform start and than the best constant image."""
    upd, x, y = small_release("eval", width=8)
    kn = Knowledge(input_shape=SHAPE, value_range=(0.0, 1.0), labels=y)
    atk = InvertingGradients(
        iterations=150, init="uniform", lr=0.05, schedule="none", tv_weight=0.0, snapshot_every=1
    )
    rec = atk(upd, kn, seed=0)
    start = rec.diagnostics["snapshots"][0][1]
    best_constant = float(psnr(x, torch.full_like(x, float(x.mean()))))
    got = float(psnr(x, rec.inputs))
    assert got > 20.0 > max(best_constant, float(psnr(x, start))) + 8.0


def test_a_bad_device_name_is_a_config_error() -> None:
    upd, _, y = small_release("eval")
    kn = Knowledge(input_shape=SHAPE, value_range=(0.0, 1.0), labels=y)
    with pytest.raises(ConfigError, match="device"):
        InvertingGradients(iterations=2, device="nonsense")(upd, kn)
