"""Scoring model inversion of a user's own classifier: does the release show what each private
class looks like?

Model inversion reconstructs classes, not records (a face per identity, not a training photo),
so a reconstruction is judged the way the literature judges it (Struppek et al., ICML 2022):
by an evaluation classifier trained on the private data with another architecture than the
target's. Here the evaluator is a small ConvNet trained on the user's reference set (images and
labels of the private classes; it never reaches an attack). A class counts as recovered when
the evaluator assigns at least half of the class's reconstructions to it.

The class, not the image, is the unit of evidence: an attack's images of one class are
near-copies (docs/decisions.md, model inversion fifth pass), so they are called one way or the
other together. The baseline is therefore what a release that reveals nothing would be credited
with: each class's reconstructions called that class with the probability ``r_c`` that the
evaluator calls a random sample of the adversary's generative prior ``c`` (estimated on
``RATE_SAMPLES`` samples; chance ``1/K`` without a prior). The number of classes credited by
chance then follows a Poisson-binomial law with these ``r_c`` (about one class in expectation,
since the rates sum to one), and the baseline is its 95 % quantile: an attack recovers classes
beyond the baseline only when a release revealing nothing would do as well less than 5 % of the
time. With five classes that takes four; with twenty, about four. The Acc@1 of random prior
samples is reported beside it.
"""

from __future__ import annotations

import torch

from trainleak.audit.assess_scoring import ReferenceSet, Scored
from trainleak.errors import MetadataError
from trainleak.experiments.risk import scored_finding
from trainleak.metrics.inversion import attack_accuracy
from trainleak.models.registry import model_spec
from trainleak.releases.classifier import ClassifierRelease
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.classifier import TrainSettings, train_classifier

EVALUATOR_STEPS = 400
MAJORITY = 0.5
LEVEL = 0.05
RATE_SAMPLES = 1000


def check_reference(ref: ReferenceSet, release: ClassifierRelease, source: str) -> None:
    """Refuse a reference set the class-level scoring cannot use (before any attack runs).

    Raises:
        MetadataError: no labels ``y``, labels outside the release's classes, fewer than two
            classes present, or images of another shape than the classifier's input.
    """
    if ref.y is None:
        raise MetadataError(
            source, "y", "labels of the private classes (model inversion is scored per class)"
        )
    k = release.num_classes
    if int(ref.y.min()) < 0 or int(ref.y.max()) >= k:
        raise MetadataError(source, "y", f"labels in [0, {k}) (the release's {k} classes)")
    if len(ref.y.unique()) < 2:
        raise MetadataError(source, "y", "images of at least two classes")
    if tuple(ref.x.shape[1:]) != tuple(release.input_shape):
        raise MetadataError(
            source,
            "x",
            f"images of shape {tuple(release.input_shape)}, found {tuple(ref.x.shape[1:])}",
        )


def reference_evaluator(
    ref: ReferenceSet, release: ClassifierRelease, seed: int
) -> torch.nn.Module:
    """A ConvNet evaluator trained on the reference set (another architecture than an MLP
    target's; the issue-12 experiments' standard evaluator)."""
    if ref.y is None:  # pragma: no cover - check_reference ran first
        raise MetadataError("reference set", "y", "labels of the private classes")
    spec = model_spec(
        "convnet", input_shape=release.input_shape, out_dim=release.num_classes, width=16
    )
    trained = train_classifier(
        ref.x.float(),
        ref.y,
        release.classes,
        spec,
        settings=TrainSettings(steps=EVALUATOR_STEPS),
        value_range=release.value_range,
        seed=seed + 7,
    )
    return trained.release.model()


def _classes_recovered(hits: torch.Tensor, labels: torch.Tensor) -> int:
    """Classes the evaluator gives at least half of their reconstructions."""
    classes = labels.unique().tolist()
    return sum(int(hits[labels == c].float().mean() >= MAJORITY) for c in classes)


def chance_quantile(rates: list[float], level: float = LEVEL) -> int:
    """The ``1 - level`` quantile of the number of successes among independent classes with
    these success probabilities (the Poisson-binomial law, by convolution)."""
    dist = torch.ones(1, dtype=torch.float64)
    for r in rates:
        dist = torch.cat([dist * (1 - r), torch.zeros(1, dtype=torch.float64)]) + torch.cat(
            [torch.zeros(1, dtype=torch.float64), dist * r]
        )
    cdf = dist.cumsum(0)
    return int(torch.nonzero(cdf >= 1 - level)[0])


def prior_rates(
    evaluator: torch.nn.Module, knowledge: Knowledge, k: int, seed: int
) -> torch.Tensor:
    """How often the evaluator calls each class on random prior samples (add-one smoothed);
    the chance rate ``1/k`` without a prior. Once per assessment: it depends on neither the
    attack nor its reconstructions."""
    prior = knowledge.generative_prior
    if prior is None:
        return torch.full((k,), 1.0 / k, dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed * 100_003 + 17)
    with torch.no_grad():
        images = prior.decoder()(prior.sample_latents(RATE_SAMPLES, gen))
        pred = evaluator(images.float()).argmax(1)
    counts = torch.bincount(pred, minlength=k).double()
    return (counts + 1) / (counts.sum() + k)


def score_classes(
    name: str,
    rec_inputs: torch.Tensor,
    rec_labels: torch.Tensor | None,
    evaluator: torch.nn.Module,
    rates: torch.Tensor,
    release: ClassifierRelease,
    knowledge: Knowledge,
    seed: int,
    own: Scored,
) -> Scored:
    """The finding of one inversion attack: classes whose reconstructions the evaluator
    assigns to them, against what a release revealing nothing would be credited with (the
    chance quantile, see the module docstring); ``rates`` from :func:`prior_rates`."""
    if rec_labels is None or len(rec_inputs) == 0:
        own.metrics["not scored"] = "no class-labelled reconstructions"
        return own
    k = release.num_classes
    acc = attack_accuracy(evaluator, rec_inputs.float(), rec_labels, k, seed=seed)
    hits = torch.tensor(acc.hits) > 0.5
    recovered = _classes_recovered(hits, rec_labels)
    classes = rec_labels.unique().tolist()
    baseline = chance_quantile([float(rates[c]) for c in classes])
    base_acc = _baseline(evaluator, rec_labels, knowledge, k, seed)
    finding = scored_finding(
        name,
        recovered,
        len(rec_labels.unique()),
        rule=(
            "classes whose reconstructions an evaluator trained on the reference set assigns to "
            "them (at least half); the baseline is the 95% quantile of what a release revealing "
            f"nothing would be credited with; Acc@1 {acc.acc1:.2f} [{acc.acc1_interval[0]:.2f}, "
            f"{acc.acc1_interval[1]:.2f}]"
        ),
        baseline=baseline,
        candidates=len(rec_inputs),
        quality=acc.acc1,
        detail=own.finding.detail,
        unit="private classes",
        baseline_kind="chance (its 95% quantile, as the rule says)",
    )
    metrics = {
        **own.metrics,
        "acc1": acc.acc1,
        "acc5": acc.acc5,
        "classes recovered": recovered,
        "random prior samples acc1": base_acc,
        "classes credited by chance, 95% quantile": baseline,
    }
    return Scored(finding, metrics, own.grid)


def _baseline(
    evaluator: torch.nn.Module,
    labels: torch.Tensor,
    knowledge: Knowledge,
    k: int,
    seed: int,
) -> float | None:
    """Acc@1 of as many random prior samples, labelled as the attack's images are."""
    prior = knowledge.generative_prior
    if prior is None:
        return None
    gen = torch.Generator().manual_seed(seed * 100_003 + len(labels))
    with torch.no_grad():
        images = prior.decoder()(prior.sample_latents(len(labels), gen))
    return attack_accuracy(evaluator, images.float(), labels, k, seed=seed).acc1
