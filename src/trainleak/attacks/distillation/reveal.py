"""Algorithm and architecture revelation: a meta-classifier trained on the shadow bank's
fingerprints predicts which algorithm and which architecture produced a released set.

Two random forests (scikit-learn) are trained on the fingerprints of the shadow sets, one on
their algorithm labels and one on their architecture labels; the release's fingerprint goes
through both. :func:`held_out_accuracy` measures the meta-classifier on shadow sets it was not
trained on (leave one seed out), without touching any private data.

References:
    Chen et al., "Turning Black Box into White Box: Dataset Distillation Leaks", arXiv
    2603.01053, 2026 (the revelation step; the features and classifier are [inferred]).
    Breiman, "Random Forests", Machine Learning 2001.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.ensemble import RandomForestClassifier

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.distillation._common import architectures, auxiliary, checked_bank
from trainleak.attacks.distillation.fingerprint import (
    FingerprintSpec,
    fingerprint,
    fingerprints,
)
from trainleak.errors import ConfigError
from trainleak.models.spec import ModelSpec
from trainleak.progress import Progress
from trainleak.releases.distilled import DistilledSet, ShadowBank
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param

REVEAL_REQUIRES = frozenset(
    {"candidate_algorithms", "candidate_architectures", "auxiliary", "shadow_bank"}
)


@dataclass(frozen=True)
class Revelation:
    """The meta-classifier's answer for one set.

    Attributes:
        algorithm: the predicted algorithm.
        architecture: the predicted architecture kind.
        algorithm_proba: the predicted probability of each algorithm.
        architecture_proba: the predicted probability of each architecture.
    """

    algorithm: str
    architecture: str
    algorithm_proba: dict[str, float]
    architecture_proba: dict[str, float]


class MetaClassifier:
    """Two random forests on fingerprints: one for the algorithm, one for the architecture."""

    def __init__(self, n_trees: int, seed: int) -> None:
        self.algo = RandomForestClassifier(n_estimators=n_trees, random_state=seed)
        self.arch = RandomForestClassifier(n_estimators=n_trees, random_state=seed + 1)

    def fit(self, feats: np.ndarray, algos: list[str], archs: list[str]) -> MetaClassifier:
        self.algo.fit(feats, algos)
        self.arch.fit(feats, archs)
        return self

    def predict(self, feats: np.ndarray) -> list[Revelation]:
        pa, pf = self.algo.predict_proba(feats), self.arch.predict_proba(feats)
        out = []
        for a, f in zip(pa, pf):
            da = {str(c): float(p) for c, p in zip(self.algo.classes_, a)}
            df = {str(c): float(p) for c, p in zip(self.arch.classes_, f)}
            out.append(Revelation(max(da, key=da.__getitem__), max(df, key=df.__getitem__), da, df))
        return out


def bank_labels(bank: ShadowBank) -> tuple[list[str], list[str]]:
    """The algorithm and architecture label of each shadow set."""
    return [s.algorithm for s in bank.sets], [s.architecture for s in bank.sets]


def held_out_accuracy(
    bank: ShadowBank,
    archs: list[ModelSpec],
    aux: tuple[torch.Tensor, torch.Tensor],
    fp: FingerprintSpec,
    n_trees: int = 200,
) -> dict[str, float]:
    """Leave-one-seed-out accuracy of the meta-classifier on the bank's own sets.

    Raises:
        ConfigError: a bank with fewer than two seeds.
    """
    seeds = sorted({s.seed for s in bank.sets})
    if len(seeds) < 2:
        raise ConfigError.invalid("shadow_bank", "sets of at least two seeds", seeds)
    feats = fingerprints([s.release for s in bank.sets], archs, aux, fp)
    algos, kinds = bank_labels(bank)
    group = np.array([s.seed for s in bank.sets])
    hits_a = hits_f = 0
    for sd in seeds:
        train, test = group != sd, group == sd
        clf = MetaClassifier(n_trees, fp.seed).fit(
            feats[train], _pick(algos, train), _pick(kinds, train)
        )
        for rev, a, f in zip(clf.predict(feats[test]), _pick(algos, test), _pick(kinds, test)):
            hits_a += rev.algorithm == a
            hits_f += rev.architecture == f
    n = len(bank)
    return {"algorithm": hits_a / n, "architecture": hits_f / n, "n": float(n)}


def _pick(labels: list[str], mask: np.ndarray) -> list[str]:
    return [lab for lab, m in zip(labels, mask) if m]


@register_attack
@dataclass(frozen=True, kw_only=True)
class InformationRevelation(Attack[DistilledSet]):
    """IRA step 2: predict the algorithm and architecture of a released distilled set.

    Returns no inputs; the prediction and its probabilities are in ``diagnostics``.

    Args:
        steps: SGD steps of each candidate network in the fingerprint.
        lr: their learning rate.
        inits: initialisations per candidate architecture.
        aux_eval: auxiliary images used by the fingerprint.
        n_trees: trees of each random forest.
    """

    name: ClassVar[str] = "ira-reveal"
    summary: ClassVar[str] = (
        "Information revelation: fingerprint a distilled set and predict its algorithm and "
        "architecture with a meta-classifier trained on a shadow bank (Chen et al. 2026)"
    )
    release_type: ClassVar[type[DistilledSet]] = DistilledSet
    requires: ClassVar[frozenset[str]] = REVEAL_REQUIRES

    steps: int = param(60, ge=2, integer=True)
    lr: float = param(0.05, gt=0)
    inits: int = param(3, ge=1, integer=True)
    aux_eval: int = param(500, ge=2, integer=True)
    n_trees: int = param(200, ge=1, integer=True)

    def fingerprint_spec(self) -> FingerprintSpec:
        """The fingerprint settings of this attack."""
        return FingerprintSpec(
            steps=self.steps, lr=self.lr, inits=self.inits, aux_eval=self.aux_eval
        )

    def reveal(self, release: DistilledSet, knowledge: Knowledge) -> Revelation:
        """Fingerprint the bank and the release, fit the meta-classifier, predict."""
        archs = list(architectures(knowledge, release).values())
        bank = checked_bank(knowledge, release)
        aux = auxiliary(knowledge, release)
        fp = self.fingerprint_spec()
        feats = fingerprints([s.release for s in bank.sets], archs, aux, fp)
        algos, kinds = bank_labels(bank)
        clf = MetaClassifier(self.n_trees, 0).fit(feats, algos, kinds)
        return clf.predict(fingerprint(release, archs, aux, fp)[None, :])[0]

    def run(
        self,
        release: DistilledSet,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        rev = self.reveal(release, knowledge)
        diag: dict[str, Any] = {
            "algorithm": rev.algorithm,
            "architecture": rev.architecture,
            "algorithm_proba": rev.algorithm_proba,
            "architecture_proba": rev.architecture_proba,
        }
        return Reconstruction(inputs=release.images[:0].clone(), diagnostics=diag)

    def expected_shape(self, release: DistilledSet, knowledge: Knowledge) -> tuple[int, ...]:
        return release.input_shape
