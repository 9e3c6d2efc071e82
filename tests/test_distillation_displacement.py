"""Issue 16, fifth pass: the LeNet's initialisation (a fresh LeNet must leave chance) and the
nearest-synthetic membership metric learned from the shadow sets' displacements."""

from __future__ import annotations

import pytest
import torch

from trainleak.attacks.distillation import NearestSyntheticMembership
from trainleak.attacks.distillation.displacement import (
    displacement_whitener,
    shadow_displacements,
)
from trainleak.data import load_digits
from trainleak.errors import ConfigError
from trainleak.metrics.membership import auroc
from trainleak.models import build_model, model_spec
from trainleak.releases.distilled import DistilledSet, ShadowBank, ShadowSet
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.distillation_bank import build_shadow_bank
from trainleak.systems.distillation import DMConfig, EvalProtocol, random_subset_accuracies

DS = load_digits()


def _lenet(init: str) -> torch.nn.Module:
    return build_model(model_spec("lenet", input_shape=(1, 8, 8), out_dim=10, init=init), seed=0)


def test_he_initialised_lenet_starts_with_logits_at_unit_scale() -> None:
    with torch.no_grad():
        he, old = (float(_lenet(i)(DS.x[:256]).std()) for i in ("he", "torch"))
    # measured: he 1.04, torch 0.08 (the signal shrinks at every ReLU layer)
    assert he > 0.4, he
    assert old < 0.2, old


def test_a_fresh_lenet_leaves_chance_on_ten_digits_per_class_in_100_steps() -> None:
    x, y, test = DS.x[:800], DS.y[:800], (DS.x[800:], DS.y[800:])
    protocol = EvalProtocol(steps=100, lr=0.01, models=3)
    found = {}
    for init in ("he", "torch"):
        spec = model_spec("lenet", input_shape=(1, 8, 8), out_dim=10, init=init)
        found[init] = random_subset_accuracies(x, y, 10, spec, test, protocol)
    # measured: he 0.74-0.83, torch 0.10-0.26 (still on the initial plateau)
    assert min(found["he"]) > 0.6, found
    assert max(found["torch"]) < 0.4, found


def test_lenet_rejects_an_unknown_initialisation() -> None:
    with pytest.raises(ConfigError, match="init"):
        _lenet("xavier")


# --- the membership metric -------------------------------------------------------------

RANGE = (-4.0, 5.0)
AUX = (DS.x[:400], DS.y[:400])
CAND = (DS.x[400:800], DS.y[400:800])  # the first 200 may be sources; the rest never are
DIRS = torch.linalg.qr(torch.randn(64, 64, generator=torch.Generator().manual_seed(3)))[0][:, :6]


def _moved(x: torch.Tensor, seed: int) -> torch.Tensor:
    """``x`` plus a displacement that is large along six fixed directions and small elsewhere
    (a stand-in for what a distillation adds to its starting images)."""
    g = torch.Generator().manual_seed(seed)
    big = torch.randn(len(x), 6, generator=g) @ DIRS.T * 1.2
    small = torch.randn(len(x), 64, generator=g) * 0.02
    return x + (big + small).reshape(x.shape)


def _set(x: torch.Tensor, y: torch.Tensor, seed: int) -> DistilledSet:
    return DistilledSet(_moved(x, seed), y.clone(), 10, value_range=RANGE)


def _bank(with_sources: bool) -> ShadowBank:
    sets = []
    for seed in range(3):
        src = torch.randperm(400, generator=torch.Generator().manual_seed(seed))[:100]
        info = {"init_source": src} if with_sources else {}
        sets.append(ShadowSet(_set(AUX[0][src], AUX[1][src], 10 + seed), "dm", "mlp", seed, info))
    return ShadowBank(tuple(sets))


def test_the_shadow_metric_beats_euclidean_when_displacements_are_anisotropic() -> None:
    src = torch.arange(0, 200, 2)
    release = _set(CAND[0][src], CAND[1][src], 99)
    know = Knowledge(auxiliary=AUX, candidates=CAND, shadow_bank=_bank(True))
    member = torch.zeros(400, dtype=torch.bool)
    member[src] = True
    keep = torch.cat([src, torch.arange(200, 400)])
    found = {}
    for metric in ("shadow", "euclidean"):
        out = NearestSyntheticMembership(metric=metric)(release, know)
        assert out.scores is not None and out.diagnostics["metric"] == metric
        found[metric] = auroc(out.scores[keep], member[keep])
    # measured: shadow 1.000, euclidean 0.837: the whitened distance finds the sources the
    # large displacements hid
    assert found["shadow"] > 0.95, found
    assert found["shadow"] >= found["euclidean"] + 0.1, found


def test_without_recorded_sources_the_metric_stays_euclidean() -> None:
    release = _set(CAND[0][:50], CAND[1][:50], 99)
    know = Knowledge(auxiliary=AUX, candidates=CAND, shadow_bank=_bank(False))
    out = NearestSyntheticMembership()(release, know)
    plain = NearestSyntheticMembership(metric="euclidean")(release, know)
    assert out.diagnostics["metric"] == "euclidean"
    assert out.scores is not None and plain.scores is not None
    assert torch.equal(out.scores, plain.scores)
    assert displacement_whitener(_bank(False), AUX[0]) is None


def test_a_recorded_source_outside_the_auxiliary_data_is_refused() -> None:
    bad = ShadowSet(
        _set(AUX[0][:10], AUX[1][:10], 0), "dm", "mlp", 0, {"init_source": torch.arange(395, 405)}
    )
    with pytest.raises(ConfigError, match="init_source"):
        shadow_displacements(ShadowBank((bad,)), AUX[0])


def test_the_bank_records_where_each_real_initialised_shadow_image_started() -> None:
    aux = (DS.x[:200], DS.y[:200])
    mlp = model_spec("mlp", input_shape=(1, 8, 8), hidden=[16], out_dim=10)
    bank = build_shadow_bank(aux, 10, {"dm": DMConfig(ipc=2, iterations=0)}, {"mlp": mlp}, (0, 1))
    for s in bank.sets:
        src = s.info["init_source"]
        # no iteration: every image is still its source record
        assert torch.equal(s.release.images, aux[0][src]), s.seed
        assert set(src.tolist()) <= set(s.info["aux_source"].tolist())
    disp = shadow_displacements(bank, aux[0])
    assert disp is not None and float(disp.abs().max()) == 0.0
