"""The distilled-data scenario: split a data set into private, auxiliary and held-out records,
distil the private part, hand the adversary its knowledge, run the IRA attacks and score them.

The private set D is what the victim distils; the auxiliary set (same distribution, disjoint)
is the adversary's; the held-out records are non-members for membership inference. Attacks see
the release and the knowledge built here: auxiliary data, the candidate lists, a shadow bank
distilled from the auxiliary data only, and the candidate records (members and non-members,
unlabelled as such).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from trainleak.attacks.base import Attack
from trainleak.attacks.distillation.membership import logit_confidence
from trainleak.data import load_cifar10, load_digits, load_mnist
from trainleak.errors import ConfigError
from trainleak.metrics.membership import auroc, tpr_at_fpr
from trainleak.models.registry import model_spec
from trainleak.models.spec import ModelSpec
from trainleak.releases.distilled import DistilledSet, ShadowBank
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.distillation_bank import aux_half
from trainleak.systems.distillation import EvalProtocol, train_on

Dataset = Literal["digits", "mnist", "cifar10"]


@dataclass(frozen=True)
class Task:
    """A data split for the distillation scenario.

    Attributes:
        name: the data set.
        private: the victim's records (members), ``(x, y)``.
        aux: the adversary's auxiliary records.
        holdout: held-out records (non-members).
        num_classes: classes of the task.
    """

    name: str
    private: tuple[torch.Tensor, torch.Tensor]
    aux: tuple[torch.Tensor, torch.Tensor]
    holdout: tuple[torch.Tensor, torch.Tensor]
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one image."""
        return tuple(int(s) for s in self.private[0].shape[1:])


def split_task(
    dataset: Dataset,
    n_private: int,
    n_aux: int,
    n_holdout: int,
    seed: int = 0,
    data_dir: str | Path | None = None,
) -> Task:
    """Load ``dataset`` and split a random permutation into private, auxiliary and held-out.

    Raises:
        ConfigError: when the data set holds fewer records than requested.
    """
    total = n_private + n_aux + n_holdout
    if dataset == "digits":
        ds = load_digits()
    elif dataset == "mnist":
        ds = load_mnist("train", data_dir=data_dir, limit=total)
    else:
        ds = load_cifar10("train", data_dir=data_dir, limit=total)
    if len(ds) < total:
        raise ConfigError.invalid(
            "n_private + n_aux + n_holdout", f"at most {len(ds)} ({dataset})", total
        )
    perm = torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed))
    parts = perm[:n_private], perm[n_private : n_private + n_aux], perm[n_private + n_aux : total]
    p, a, h = ((ds.x[i], ds.y[i]) for i in parts)
    return Task(dataset, p, a, h, ds.num_classes)


def candidate_specs(kinds: list[str], input_shape: tuple[int, ...], k: int) -> dict[str, ModelSpec]:
    """The candidate architectures, sized for the task (the ConvNet with instance norm, as in
    the distillation literature).

    Raises:
        ConfigError: for an unknown kind.
    """
    sizes: dict[str, dict[str, Any]] = {
        "mlp": {"hidden": [128]},
        "convnet": {"width": 16, "norm": True},
        "lenet": {"init": "he"},
        "resnet": {"width": 8},
    }
    unknown = sorted(set(kinds) - set(sizes))
    if unknown:
        raise ConfigError.invalid("architectures", f"kinds among {sorted(sizes)}", unknown)
    return {f: model_spec(f, input_shape=input_shape, out_dim=k, **sizes[f]) for f in kinds}


def candidates(task: Task) -> tuple[torch.Tensor, torch.Tensor]:
    """The records scored by membership attacks: every member, then every held-out record."""
    return (
        torch.cat([task.private[0], task.holdout[0]]),
        torch.cat([task.private[1], task.holdout[1]]),
    )


def adversary_knowledge(
    task: Task, specs: dict[str, ModelSpec], algorithms: list[str], bank: ShadowBank
) -> Knowledge:
    """What the adversary knows: no private data, no model trained on it."""
    return Knowledge(
        input_shape=task.input_shape,
        value_range=(0.0, 1.0),
        label_set=tuple(range(task.num_classes)),
        candidate_algorithms=tuple(algorithms),
        candidate_architectures=tuple(specs.values()),
        auxiliary=task.aux,
        shadow_bank=bank,
        candidates=candidates(task),
    )


@dataclass(frozen=True)
class MembershipScore:
    """AUROC and TPR at 1% and 0.1% FPR of one score against one positive set."""

    auroc: float
    tpr_1: float
    tpr_01: float
    n_pos: int
    n_neg: int


def score_membership(
    scores: torch.Tensor, positives: torch.Tensor, n_private: int
) -> MembershipScore:
    """Score ``scores`` (over :func:`candidates`) with ``positives`` (indices into the private
    set) against every held-out record."""
    neg = torch.arange(n_private, len(scores))
    s = torch.cat([scores[positives], scores[neg]])
    m = torch.cat(
        [torch.ones(len(positives), dtype=torch.bool), torch.zeros(len(neg), dtype=torch.bool)]
    )
    return MembershipScore(
        auroc(s, m), tpr_at_fpr(s, m, 0.01), tpr_at_fpr(s, m, 0.001), len(positives), len(neg)
    )


def attack_scores(
    release: DistilledSet, knowledge: Knowledge, attacks: dict[str, Attack[DistilledSet]]
) -> dict[str, torch.Tensor]:
    """Each membership attack's scores over the candidates."""
    out = {}
    for name, attack in attacks.items():
        scores = attack(release, knowledge).scores
        if scores is None:
            raise ConfigError.invalid("attacks", "membership attacks that return scores", name)
        out[name] = scores
    return out


def reference_scores(
    task: Task, spec: ModelSpec, protocol: EvalProtocol, shadows: int
) -> dict[str, torch.Tensor]:
    """The non-distilled reference: a model trained on the private data itself, attacked by its
    confidence and by offline LiRA with shadow models trained on auxiliary halves."""
    x, y = candidates(task)
    target = logit_confidence(train_on(*task.private, spec, protocol, seed=0).eval(), x, y)
    outs = []
    for s in range(shadows):
        half = aux_half(len(task.aux[0]), s)
        net = train_on(task.aux[0][half], task.aux[1][half], spec, protocol, seed=s).eval()
        outs.append(logit_confidence(net, x, y))
    stack = torch.stack(outs)
    mu = stack.mean(0)
    sigma = (stack - mu).std().clamp_min(1e-6)
    return {"loss": target.float(), "lira": ((target - mu) / sigma).float()}
