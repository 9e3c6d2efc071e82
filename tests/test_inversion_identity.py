"""The dlib identity evaluator on the scenario's own faces (a sanity ceiling), its Acc@5 and
class-level interval, the latent-ball switch of the attacks, and the decoder projection that
measures what a prior can draw (issue 12, fourth pass)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import require_data, require_module
from trainleak.attacks.inversion import AdaptiveInversion
from trainleak.attacks.inversion._latent import typical_radius
from trainleak.errors import ConfigError, ShapeError
from trainleak.experiments import get_experiment
from trainleak.experiments._inversion_common import attacks
from trainleak.metrics import face_identity
from trainleak.metrics.face_identity import identity_score
from trainleak.metrics.intervals import bootstrap_interval, class_bootstrap_interval
from trainleak.metrics.inversion import decoder_projection
from trainleak.models.registry import model_spec
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.inversion import orl_task
from trainleak.systems.classifier import PriorSettings, TrainSettings, train_classifier, train_prior


def _blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    k = int(2 * round(2 * sigma) + 1)
    t = torch.arange(k, dtype=x.dtype) - k // 2
    g = torch.exp(-(t**2) / (2 * sigma**2))
    g = g / g.sum()
    x = F.conv2d(F.pad(x, (k // 2, k // 2, 0, 0), mode="replicate"), g.view(1, 1, 1, k))
    return F.conv2d(F.pad(x, (0, 0, k // 2, k // 2), mode="replicate"), g.view(1, 1, k, 1))


def test_dlib_ranks_held_out_private_faces_first_at_the_scenario_size(data_dir: Path) -> None:
    """The evaluator the benchmark uses, on the benchmark's 32 x 32 split: a held-out private
    face (image 9) is nearest to the gallery images of its own identity (images 1-2; measured
    18 of 20); a copy blurred by 2 pixels mostly is not (measured 5 of 20: the evaluator reads
    fine detail, which bounds what a blurry prior can score)."""
    require_module("dlib", "pip install 'trainleak[faces]'")
    require_data(data_dir / "att_faces", "the ORL faces")
    task = orl_task(32)
    (gx, gy), (tx, ty) = task.private, task.test
    keep = (torch.arange(len(gx)) % 8) < 2
    emb = face_identity.DlibEmbedder()
    ref = emb(gx[keep])
    q, qy = tx[::2], ty[::2]  # image 9 of each of the 20 private identities
    sharp = identity_score(emb, q, qy, ref, gy[keep], 20)
    blurred = identity_score(emb, _blur(q, 2.0), qy, ref, gy[keep], 20)
    assert sharp.accuracy >= 0.75, sharp
    assert sharp.acc5 >= sharp.accuracy
    assert blurred.accuracy <= sharp.accuracy - 0.3, (sharp.accuracy, blurred.accuracy)


class _Given:
    """A stand-in embedder: row ``i`` of the images is embedded as ``table[i]``."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        return self.table[: len(images)]


def test_identity_acc5_and_the_class_interval() -> None:
    # private images: class c at (c, 0); queries sit between classes
    ref = torch.tensor([[float(c), 0.0] for c in range(8)], dtype=torch.float64)
    ry = torch.arange(8)
    queries = torch.tensor([[0.1, 0.0], [2.4, 0.0], [7.0, 5.0], [3.0, 0.0]], dtype=torch.float64)
    labels = torch.tensor([0, 3, 0, 5])
    got = identity_score(_Given(queries), queries, labels, ref, ry, 8)  # type: ignore[arg-type]
    # nearest classes: 0 (hit); 2 then 3 (rank 1: top-5 only); 7 far closer than 0 (rank 7:
    # miss); 3, then 2 and 4, then 5 (rank 3: top-5 only)
    assert got.accuracy == 0.25 and got.acc5 == 0.75
    assert got.hits == (1.0, 0.0, 0.0, 0.0)
    assert got.interval[0] <= got.accuracy <= got.interval[1]


def test_class_interval_is_wider_than_the_image_interval_for_copies() -> None:
    # ten classes of eight copies each, three classes hit: eight images per class are one
    # piece of evidence, so the class bootstrap must be far wider than the image bootstrap
    groups = np.repeat(np.arange(10), 8)
    hits = np.isin(groups, [1, 4, 7]).astype(float)
    lo_c, hi_c = class_bootstrap_interval(hits, groups)
    lo_i, hi_i = bootstrap_interval(hits)
    assert lo_c <= 0.3 <= hi_c
    assert (hi_c - lo_c) > 1.8 * (hi_i - lo_i)
    # independent outcomes, one per group: the two agree
    one = np.arange(80)
    lo_1, hi_1 = class_bootstrap_interval(hits, one)
    assert abs((hi_1 - lo_1) - (hi_i - lo_i)) < 0.05
    with pytest.raises(ShapeError):
        class_bootstrap_interval(hits, groups[:5])


def test_decoder_projection_finds_images_the_decoder_can_draw() -> None:
    torch.manual_seed(0)
    dec = nn.Sequential(nn.Linear(3, 16), nn.Sigmoid(), nn.Unflatten(1, (1, 4, 4)))
    with torch.no_grad():
        x = dec(torch.randn(6, 3))
        start = float((dec(torch.zeros(6, 3)) - x).pow(2).mean())
    out = decoder_projection(dec, x, 3, steps=300)
    assert float((out - x).pow(2).mean()) < 0.01 * start
    assert all(p.requires_grad for p in dec.parameters())  # restored
    with pytest.raises(ShapeError, match="draws"):
        decoder_projection(dec, torch.zeros(2, 1, 5, 5), 3, steps=1)


def test_latent_ball_keeps_optimised_latents_in_the_typical_set() -> None:
    assert typical_radius(16, 0.99) == pytest.approx(5.657, abs=1e-3)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(120, 1, 8, 8, generator=gen)
    y = (x[:, 0, :4].mean((1, 2)) > x[:, 0, 4:].mean((1, 2))).long()
    spec_kw = {"input_shape": (1, 8, 8), "hidden": [32], "out_dim": 2}
    target = train_classifier(
        x, y, ("a", "b"), model_spec("mlp", **spec_kw), settings=TrainSettings(steps=60)
    )
    prior = train_prior(x, PriorSettings(latent_dim=4, hidden=(32, 32), steps=60), seed=0)
    know = Knowledge(input_shape=(1, 8, 8), value_range=(0.0, 1.0), generative_prior=prior)
    norms = {}
    for ball in (0.0, 0.9):
        atk = AdaptiveInversion(
            candidates=20, keep=3, final=2, steps=40, lr=0.5, restarts=1, model_augment=0,
            latent_ball=ball, latent_clip=10.0,
        )  # fmt: skip
        captured: list[torch.Tensor] = []
        orig = atk._descend  # the latent search (and the feature search, off here)

        def spy(
            *a: object, _o: object = orig, _c: list[torch.Tensor] = captured, **kw: object
        ) -> object:
            z, losses = _o(*a, **kw)  # type: ignore[operator]
            _c.append(z)
            return z, losses

        object.__setattr__(atk, "_descend", spy)
        atk(target.release, know, seed=1)
        norms[ball] = float(captured[0].norm(dim=1).max())
    radius = typical_radius(4, 0.9)
    assert norms[0.9] <= radius + 1e-5
    assert norms[0.0] > radius, norms  # without the ball the margin loss drives latents out


def test_latent_ball_config_reaches_the_adaptive_attack_only() -> None:
    exp = get_experiment("model-inversion-adaptive")
    cfg = exp.make_config({"latent_ball": 0.99})
    got = attacks(cfg, flip=False)  # type: ignore[arg-type]
    assert got["adaptive"].latent_ball == 0.99  # type: ignore[attr-defined]
    assert got["standard"].latent_ball == 0.0  # type: ignore[attr-defined]
    # the baseline selects as the attack it is compared with (house rule: same selection)
    assert got["prior_only"].select == got["adaptive"].select == "margin"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="latent_ball"):
        exp.make_config({"latent_ball": 1.0})


def test_feature_search_config_reaches_the_adaptive_attack_only() -> None:
    exp = get_experiment("model-inversion-adaptive")
    cfg = exp.make_config({"feature_steps": 50, "feature_depth": 2, "feature_radius": 0.1})
    got = attacks(cfg, flip=False)  # type: ignore[arg-type]
    ada, std = got["adaptive"], got["standard"]
    assert (ada.feature_steps, ada.feature_depth, ada.feature_radius) == (50, 2, 0.1)  # type: ignore[attr-defined]
    assert std.feature_steps == 0  # type: ignore[attr-defined]
    # on by default in the experiments (chosen on the dev task), off in the attack class
    dflt = attacks(exp.make_config({}), flip=False)  # type: ignore[arg-type]
    assert dflt["adaptive"].feature_steps == 100  # type: ignore[attr-defined]
    assert AdaptiveInversion().feature_steps == 0
    with pytest.raises(ConfigError, match="feature_radius"):
        exp.make_config({"feature_radius": 0.0})
