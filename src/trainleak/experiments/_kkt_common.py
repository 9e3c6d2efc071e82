"""Shared set-up and scoring of the KKT experiments (``kkt-reconstruction``,
``optimizer-fingerprints``).

Ground truth never reaches the attack or its output: the data set is split (one seeded
permutation, :func:`trainleak.data.heldout_split`) into a private pool that training sets are
drawn from, a *public* held-out part and a *reference* held-out part. The model is trained on
images minus the **public** mean (a preprocessing constant that ships with the release, like a
normalisation constant); the attack's value range is derived from it and its candidates are
shifted back by it. The training set's own mean is never computed.

Every method is scored by the same code on the same training images:

- SSIM after NCC matching (Haim et al.'s protocol, :func:`evaluate_reconstruction`);
- specificity (:func:`trainleak.metrics.specificity`): the matched candidate is closer to its
  training image than to every reference held-out image of the same original class.

Baselines get the attack's budget (as many candidates, the same best-match selection): ``m``
uniform random images, ``m`` public held-out images, the public mean plus ``m`` perturbations
whose norms match the attack's candidates. The class means of the public data are an *oracle*
reference (they use the ten original classes, which the attack is not given) with ``k``
candidates, kept outside the equal-budget comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

import torch
from torch import Tensor

from trainleak.data import (
    HeldOutSplit,
    balanced_binary_indices,
    binary_task,
    heldout_split,
    load_dataset,
    to_symmetric,
)
from trainleak.data.splits import PoolName
from trainleak.experiments.risk import Release, scored_finding
from trainleak.metrics import (
    check_equal_budget,
    class_mean_candidates,
    evaluate_reconstruction,
    heldout_candidates,
    perturbed_mean_candidates,
    random_candidates,
    specificity,
)
from trainleak.metrics.intervals import difference_lower_bound, wilson_interval
from trainleak.releases import Knowledge

Role = Literal["attack", "variant", "baseline", "control", "oracle"]
RANDOM = "random uniform"
HELDOUT = "held-out images"
PERTURBED = "public mean + perturbations"
ORACLE = "class means of held-out data (oracle)"
EQUAL_BUDGET = (RANDOM, HELDOUT, PERTURBED)


@dataclass(frozen=True)
class KKTTask:
    """One training set and the held-out data around it (all tensors in ``[-1, 1]`` pixels).

    Attributes:
        x, y: training images and binary labels.
        classes: the training images' original (fine-grained) classes, for specificity.
        public_x, public_classes: held-out data the attacker may know.
        reference_x, reference_classes: held-out data only the scorer uses.
        public_mean: ``(1, C, H, W)`` mean image of the public part.
        shift: what the model's inputs are minus (the public mean, or zeros without centring).
    """

    x: Tensor
    y: Tensor
    classes: Tensor
    public_x: Tensor
    public_classes: Tensor
    reference_x: Tensor
    reference_classes: Tensor
    public_mean: Tensor
    shift: Tensor

    @property
    def model_x(self) -> Tensor:
        """The model's training inputs: images minus the public shift."""
        return self.x - self.shift

    def knowledge(self) -> Knowledge:
        """Input shape, binary labels and the value range of the shifted inputs (public)."""
        lo, hi = float((-1.0 - self.shift).min()), float((1.0 - self.shift).max())
        return Knowledge(
            input_shape=tuple(self.x.shape[1:]), value_range=(lo, hi), label_set=(0, 1)
        )

    def to_image_space(self, candidates: Tensor) -> Tensor:
        """Candidates back in image space: plus the public shift, clamped to ``[-1, 1]``."""
        return (candidates + self.shift).clamp(-1.0, 1.0)


def task_split(dataset: str, *, split_seed: int = 0, data_dir: str | None = None) -> HeldOutSplit:
    """Load ``dataset`` and split it into private / public / reference parts."""
    kwargs: dict[str, Any] = {} if dataset == "digits" else {"data_dir": data_dir}
    return heldout_split(load_dataset(dataset, **kwargs), seed=split_seed)


def load_task(
    source: str | HeldOutSplit,
    *,
    per_class: int,
    seed: int,
    split_seed: int = 0,
    pool: PoolName = "all",
    center: bool = True,
    data_dir: str | None = None,
) -> KKTTask:
    """Draw a balanced binary training set from the private pool, with its held-out data.

    Args:
        source: a data set name (``digits``, ``mnist``, ``cifar10``), split here, or a split
            already made by :func:`task_split`.
        per_class: training images per binary label.
        seed: seed of the training-set draw.
        split_seed: seed of the private / public / reference split when ``source`` is a name
            (fixed across seeds so that the validation and evaluation pools stay apart).
        pool: draw from the whole private pool or from its validation / evaluation half.
        center: train on images minus the public mean (else on the images themselves).
        data_dir: the data root for files.
    """
    split = (
        task_split(source, split_seed=split_seed, data_dir=data_dir)
        if isinstance(source, str)
        else source
    )
    classes = split.private.classes
    kind: Literal["odd_even", "vehicles_animals"] = (
        "odd_even" if all(c.isdigit() for c in classes) else "vehicles_animals"
    )
    pool_ds = split.pool(pool)
    train = pool_ds.subset(balanced_binary_indices(pool_ds, kind, per_class, seed=seed))
    mean = split.public_mean()
    return KKTTask(
        x=to_symmetric(train.x),
        y=binary_task(train, kind).y,
        classes=train.y,
        public_x=to_symmetric(split.public.x),
        public_classes=split.public.y,
        reference_x=to_symmetric(split.reference.x),
        reference_classes=split.reference.y,
        public_mean=mean,
        shift=mean if center else torch.zeros_like(mean),
    )


def baselines_for(
    task: KKTTask, attack_images: Tensor, seed: int
) -> dict[str, tuple[Role, Tensor]]:
    """The equal-budget baselines (``len(attack_images)`` candidates each) and the oracle.

    ``attack_images`` are the attack's candidates in image space; only their number and their
    norms around the public mean are used (for the perturbation baseline).
    """
    m = len(attack_images)
    gen = torch.Generator().manual_seed(seed + 1)
    norms = (attack_images - task.public_mean).flatten(1).norm(dim=1)
    shape = tuple(task.x.shape[1:])
    out: dict[str, tuple[Role, Tensor]] = {
        RANDOM: ("baseline", random_candidates(shape, m, gen, (-1.0, 1.0))),
        HELDOUT: ("baseline", heldout_candidates(task.public_x, m, gen)),
        PERTURBED: (
            "baseline",
            perturbed_mean_candidates(task.public_mean, norms, gen, (-1.0, 1.0)),
        ),
        ORACLE: (
            "oracle",
            class_mean_candidates(
                task.public_x, task.public_classes, int(task.public_classes.max()) + 1
            ),
        ),
    }
    check_equal_budget(m, {k: v for k, (_, v) in out.items()}, exempt={ORACLE})
    return out


@dataclass(frozen=True)
class MethodScore:
    """The scores of one method's candidates against one training set.

    Attributes:
        n: training images scored.
        candidates: the method's number of candidates.
        ssim_04, ssim_06: training images whose matched candidate has SSIM >= 0.4 / 0.6.
        median_ssim, mean_top10_ssim: SSIM summaries.
        specific: training images whose matched candidate is closer to them than to every
            reference held-out image of the same class.
        specific_ssim_04: those that are specific and have SSIM >= 0.4.
        median_ratio: median train / held-out distance ratio.
    """

    n: int
    candidates: int
    ssim_04: int
    ssim_06: int
    median_ssim: float
    mean_top10_ssim: float
    specific: int
    specific_ssim_04: int
    median_ratio: float


def score(task: KKTTask, images: Tensor) -> MethodScore:
    """Score candidates (in image space) by SSIM after NCC matching, and by specificity."""
    s = evaluate_reconstruction(task.x, images)
    sp = specificity(
        task.x, task.classes, images[s.matched], task.reference_x, task.reference_classes
    )
    return MethodScore(
        n=s.n,
        candidates=len(images),
        ssim_04=s.counts[0.4],
        ssim_06=s.counts[0.6],
        median_ssim=s.median_ssim,
        mean_top10_ssim=s.mean_top10_ssim,
        specific=sp.count,
        specific_ssim_04=int((sp.specific & (s.ssim >= 0.4)).sum()),
        median_ratio=sp.median_ratio,
    )


@dataclass(frozen=True, kw_only=True)
class ScoreRow(MethodScore):
    """One method's scores (the fields of :class:`MethodScore`) on one seed's training set."""

    dataset: str
    optimizer: str
    seed: int
    method: str
    role: Role

    @classmethod
    def of(
        cls, dataset: str, optimizer: str, seed: int, method: str, role: Role, s: MethodScore
    ) -> ScoreRow:
        """A row from a :class:`MethodScore`."""
        values = {f.name: getattr(s, f.name) for f in fields(MethodScore)}
        return cls(
            dataset=dataset, optimizer=optimizer, seed=seed, method=method, role=role, **values
        )


def exceeds(
    a: Sequence[float], b: Sequence[float], n: int, level: float = 0.95
) -> tuple[bool, dict[str, Any]]:
    """Whether counts ``a`` exceed counts ``b`` (paired by seed), decided on intervals.

    Two or more seeds: the one-sided lower confidence bound on the mean paired difference must
    be above zero (a spread larger than the mean never passes). One seed: the counts are out of
    ``n`` training images, and the Wilson interval of ``a`` must lie wholly above that of
    ``b``.
    """
    if len(a) != len(b) or not a:
        raise ValueError("exceeds needs the same non-zero number of values on both sides")
    if len(a) >= 2:
        lb = difference_lower_bound(list(a), list(b), level, paired=True)
        return lb > 0, {"test": f"paired t over {len(a)} seeds", "difference_lower_bound": lb}
    lo_a = wilson_interval(int(a[0]), n, level)[0]
    hi_b = wilson_interval(int(b[0]), n, level)[1]
    return lo_a > hi_b, {
        "test": "one seed: Wilson intervals over training images",
        "attack_lower": lo_a,
        "baseline_upper": hi_b,
    }


KKT_RULE = (
    "SSIM >= 0.4 after NCC matching, and closer to its training image than to every reference "
    "held-out image of its class (specific)"
)
"""The KKT experiments' success rule for one training image (``specific_ssim_04``)."""


def kkt_releases(rows: Sequence[object]) -> dict[str, Release]:
    """Per released checkpoint (data set, optimizer, seed): a finding per attack (``attack``
    and ``variant`` rows) against the best equal-budget baseline by :data:`KKT_RULE`; the
    untrained control (another release) and the oracle (it uses classes the attack is not
    given) are left out."""
    scores = [r for r in rows if isinstance(r, ScoreRow)]
    out: dict[str, Release] = {}
    for key in sorted({(r.dataset, r.optimizer, r.seed) for r in scores}):
        mine = [r for r in scores if (r.dataset, r.optimizer, r.seed) == key]
        base = [r for r in mine if r.role == "baseline"]
        best = max(base, key=lambda r: r.specific_ssim_04, default=None)
        found = [
            scored_finding(
                f"KKT reconstruction ({r.method})",
                r.specific_ssim_04,
                r.n,
                rule=KKT_RULE,
                baseline=None if best is None else best.specific_ssim_04,
                candidates=r.candidates,
                quality=r.median_ssim,
                detail=f"{r.ssim_04} at SSIM >= 0.4, {r.specific} specific"
                + ("" if best is None else f"; best equal-budget baseline: {best.method}"),
            )
            for r in mine
            if r.role in ("attack", "variant")
        ]
        name = f"the checkpoint trained on {key[0]} with {key[1]}, seed {key[2]}"
        out[name] = (found, [])
    return out
