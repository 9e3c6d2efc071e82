"""The revelation meta-classifier's mechanisms (issue 16, fourth pass): the metadata gate, the
feature groups chosen on the shadow bank, the objective residuals, and shadow sets measured
against auxiliary records they were not distilled from. Each test fails on the code before it
(the forest had none of these)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainleak.attacks.distillation.fingerprint import (
    FingerprintSpec,
    bank_fingerprints,
    feature_groups,
    fingerprint,
)
from trainleak.attacks.distillation.objective import objective_residuals
from trainleak.attacks.distillation.reveal import MetaClassifier
from trainleak.data import load_digits
from trainleak.errors import ConfigError
from trainleak.models import model_spec
from trainleak.releases.distilled import DistilledSet, ShadowBank, ShadowSet
from trainleak.systems.distillation import DMConfig, distill

DS = load_digits()
MLP = model_spec("mlp", input_shape=(1, 8, 8), hidden=[32], out_dim=10)
GROUPS = {"image": slice(0, 3), "objective": slice(3, 6)}
IMAGE_NN_MIN = 8 + 3 + 4 + 3
"""Index of the smallest nearest-auxiliary distance among the image statistics (8 bins)."""


def _bank_features(
    rng: np.random.Generator, informative: str
) -> tuple[np.ndarray, list[str], list[int]]:
    """Three seeds of four sets per label ("a", "b"); the ``informative`` group separates the
    labels the same way in every seed, the other one in a different way per seed."""
    rows, labels, seeds = [], [], []
    for seed in range(3):
        flip = seed % 2
        for lab in ("a", "b"):
            for _ in range(4):
                good = (1.0 if lab == "a" else -1.0) + 0.7 * rng.standard_normal(3)
                bad = (1.0 if (lab == "a") != bool(flip) else -1.0) * 3 + 0.1 * rng.standard_normal(
                    3
                )
                image, obj = (good, bad) if informative == "image" else (bad, good)
                rows.append(np.concatenate([image, obj]))
                labels.append(lab)
                seeds.append(seed)
    return np.asarray(rows), labels, seeds


def test_each_forest_uses_the_groups_that_generalise_across_shadow_seeds() -> None:
    rng = np.random.default_rng(0)
    for informative, cols in (("image", [0, 1, 2]), ("objective", [0, 1, 2, 3, 4, 5])):
        feats, labels, seeds = _bank_features(rng, informative)
        sigs = [(False, False)] * len(labels)
        clf = MetaClassifier(30, 0).fit(feats, labels, labels, sigs, seeds, GROUPS)
        # image alone when the objective group misleads; both (the fuller) when it helps
        assert clf.arch.cols.tolist() == cols, (informative, clf.arch.cols)


def test_metadata_gate_keeps_an_algorithm_that_publishes_a_learning_rate() -> None:
    rng = np.random.default_rng(1)
    feats = rng.standard_normal((24, 6))
    feats[12:] += 4.0  # "mtt" sets look different from "dc" sets ...
    algos = ["dc"] * 12 + ["mtt"] * 12
    sigs = [(False, False)] * 12 + [(True, False)] * 12  # ... and publish a learning rate
    seeds = [i % 3 for i in range(24)]
    clf = MetaClassifier(30, 0).fit(feats, algos, algos, sigs, seeds, GROUPS)
    looks_dc = rng.standard_normal((2, 6)) - 3.0  # no tree votes "mtt" here
    assert clf.algo.rf.predict_proba(looks_dc[:, clf.algo.cols])[:, 1].max() == 0.0
    gated = clf.predict(looks_dc, [(True, False), (False, False)])
    assert [r.algorithm for r in gated] == ["mtt", "dc"]
    assert gated[0].algorithm_proba == {"dc": 0.0, "mtt": 1.0}
    # the architecture forest is not gated: it keeps the forest's own answer
    assert gated[0].architecture == "dc"


def _copies(aux_x: torch.Tensor, aux_y: torch.Tensor, idx: torch.Tensor) -> DistilledSet:
    return DistilledSet(aux_x[idx].clone(), aux_y[idx].clone(), 10)


def test_shadow_sets_are_measured_against_records_they_were_not_distilled_from() -> None:
    aux = (DS.x[:300], DS.y[:300])
    srcs = [torch.arange(0, 150), torch.arange(150, 300)]
    picks = [torch.arange(0, 40), torch.arange(150, 190)]
    sets = tuple(
        ShadowSet(_copies(*aux, p), "dm", "mlp", i, {"aux_source": s})
        for i, (p, s) in enumerate(zip(picks, srcs))
    )
    fp = FingerprintSpec(aux_eval=200, objective_inits=1, objective_steps=0)
    feats, used = bank_fingerprints(ShadowBank(sets), [MLP], aux, fp)
    assert used.aux_eval == 150  # the smallest complement
    assert (feats[:, IMAGE_NN_MIN] > 0.1).all(), feats[:, IMAGE_NN_MIN]
    # without the exclusion each copy finds itself among the auxiliary records
    plain = fingerprint(sets[0].release, [MLP], aux, used)
    assert plain[IMAGE_NN_MIN] == pytest.approx(0.0, abs=1e-9)


def test_a_bank_that_used_every_auxiliary_record_is_refused() -> None:
    aux = (DS.x[:100], DS.y[:100])
    s = ShadowSet(_copies(*aux, torch.arange(20)), "dm", "mlp", 0, {"aux_source": torch.arange(99)})
    with pytest.raises(ConfigError, match="unused"):
        bank_fingerprints(ShadowBank((s,)), [MLP], aux, FingerprintSpec(objective_inits=1))


def test_feature_groups_cover_the_fingerprint() -> None:
    rel = _copies(DS.x, DS.y, torch.arange(20))
    aux = (DS.x[100:300], DS.y[100:300])
    for dynamics in (False, True):
        fp = FingerprintSpec(steps=4, inits=1, dynamics=dynamics, objective_inits=1)
        groups = feature_groups(2, fp)
        assert list(groups) == ["image", "objective"] + (["dynamics"] if dynamics else [])
        last = max(g.stop for g in groups.values())
        assert len(fingerprint(rel, [MLP, MLP], aux, fp)) == last


def test_distribution_matching_lowers_its_own_residual_below_random_real_images() -> None:
    private, aux = (DS.x[:500], DS.y[:500]), (DS.x[500:900].float(), DS.y[500:900])
    run = distill(*private, 10, MLP, DMConfig(ipc=10, iterations=1000, lr_img=0.01), seed=0)
    # the DM set's initialisation is exactly these real images: only the distillation differs
    assert run.init_indices is not None
    random_real = DistilledSet(private[0][run.init_indices].float(), run.release.labels, 10)
    kw = {"inits": 3, "steps": 0, "lr": 0.05, "seed": 0}
    dist = objective_residuals(run.release, MLP, aux, **kw)
    base = objective_residuals(random_real, MLP, aux, **kw)
    # the log DM discrepancy (the third feature) falls: measured -3.383 against -3.190 (the
    # residual is dominated by the gap between the private and the auxiliary class means)
    assert dist[2] < base[2] - 0.1, (dist, base)
