"""Split-learning scenarios: the data split (clients, adversary, test), the default cut of each
data set's model, one UFSL run per defense setting, and its attacks scored against the truth.

The adversary's auxiliary images are drawn disjoint from every client's records (checked);
nothing computed from the clients' data reaches an attack: the attacks see the transcript
and ``Knowledge(prior=aux images, value_range=...)``, and the baseline is the auxiliary mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainleak.attacks.base import Attack, Reconstruction
from trainleak.data import load_dataset
from trainleak.defenses.split_learning import KDUFSL, k_anonymity
from trainleak.errors import ConfigError
from trainleak.metrics.split_learning import (
    ReconstructionScore,
    score_reconstruction,
    transcript_groups,
)
from trainleak.models.registry import model_spec
from trainleak.models.split import SplitSpec
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_learning import SmashedDefenseSpec, SplitTranscript
from trainleak.systems.split_learning import UFSLConfig, UFSLRun, split_accuracy, train_ufsl

_CUTS: dict[str, dict[str, object]] = {
    "digits": {"channels": [8], "stride": 1},  # the seed's 512-dimensional smashed data
    "mnist": {"channels": [8], "stride": 2},  # 8 x 14 x 14 = 1568
    "cifar10": {"channels": [12], "stride": 2},  # 12 x 16 x 16 = 3072
}


@dataclass(frozen=True)
class SplitTask:
    """Disjoint parts of one data set: the clients' private records, the adversary's
    auxiliary images (unlabelled use), and a test set."""

    dataset: str
    clients: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    aux: torch.Tensor
    test: tuple[torch.Tensor, torch.Tensor]
    split: SplitSpec

    @property
    def private_x(self) -> torch.Tensor:
        return torch.cat([c[0] for c in self.clients])


def default_split(dataset: str, input_shape: tuple[int, ...], hidden: int = 128) -> SplitSpec:
    """Head = one conv + ReLU, body = one dense layer + ReLU, tail = the output layer."""
    if dataset not in _CUTS:
        raise ConfigError.invalid("dataset", f"one of {sorted(_CUTS)}", dataset)
    spec = model_spec(
        "split_convnet", input_shape=input_shape, out_dim=10, hidden=[hidden], **_CUTS[dataset]
    )
    return SplitSpec(spec, 1, 2, tuple(input_shape))


def split_task(
    dataset: str, n_clients: int, per_client: int, n_aux: int, n_test: int, seed: int
) -> SplitTask:
    """Load ``dataset`` (the train split) and cut it into disjoint client, auxiliary and
    test parts.

    Raises:
        ConfigError: a data set too small for the request, or (never expected) overlap.
    """
    need = n_clients * per_client + n_aux + n_test
    ds = load_dataset(dataset) if dataset == "digits" else load_dataset(dataset, limit=need)
    if len(ds) < need:
        raise ConfigError.invalid("sizes", f"at most {len(ds)} records of {dataset}", need)
    perm = torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed))
    n_priv = n_clients * per_client
    priv = ds.subset(perm[:n_priv])
    aux = ds.subset(perm[n_priv : n_priv + n_aux])
    test = ds.subset(perm[n_priv + n_aux : need])
    clients = tuple(
        (
            priv.x[i * per_client : (i + 1) * per_client],
            priv.y[i * per_client : (i + 1) * per_client],
        )
        for i in range(n_clients)
    )
    check_disjoint(torch.cat([c[0] for c in clients]), aux.x)
    split = default_split(dataset, tuple(int(s) for s in ds.x.shape[1:]))
    return SplitTask(dataset, clients, aux.x, (test.x, test.y), split)


def check_disjoint(private: torch.Tensor, aux: torch.Tensor) -> None:
    """Raise :class:`ConfigError` when an auxiliary image equals a private one."""
    p = {bytes(r.numpy().tobytes()) for r in private.reshape(len(private), -1)}
    shared = sum(bytes(r.numpy().tobytes()) in p for r in aux.reshape(len(aux), -1))
    if shared:
        raise ConfigError.invalid(
            "auxiliary", "images disjoint from the clients' private data", f"{shared} shared"
        )


def adversary_knowledge(task: SplitTask) -> Knowledge:
    """The server's knowledge: auxiliary images of the distribution and the value range."""
    return Knowledge(
        prior=task.aux, value_range=(0.0, 1.0), input_shape=tuple(task.split.input_shape)
    )


@dataclass(frozen=True)
class SettingRun:
    """One trained setting: the run, its accuracy (clean and through the defense) and the
    smallest multiplicity of any transmitted row within its step."""

    run: UFSLRun
    acc_clean: float
    acc_defended: float
    min_multiplicity: int


def run_setting(
    task: SplitTask, cfg: UFSLConfig, spec: SmashedDefenseSpec | None, seed: int
) -> SettingRun:
    """Train UFSL under ``spec`` and measure utility and k-anonymity of the transcript."""
    defense = None if spec is None else KDUFSL(spec)
    run = train_ufsl(task.clients, task.split, cfg, defense=defense, seed=seed)
    tx, ty = task.test
    clean = split_accuracy(run.parts, tx, ty, batch_size=cfg.batch_size, seed=seed)
    defended = split_accuracy(
        run.parts, tx, ty, defense=defense, batch_size=cfg.batch_size, seed=seed
    )
    tr = run.transcript
    mult = min(k_anonymity(tr.smashed[rows]) for _, rows in tr.batches())
    return SettingRun(run, clean, defended, mult)


@dataclass(frozen=True)
class AttackOutcome:
    """An attack's score beside the auxiliary-mean baseline on the same rows."""

    score: ReconstructionScore
    baseline: ReconstructionScore
    reconstruction: Reconstruction
    truth: torch.Tensor


def attack_transcript(
    setting: SettingRun,
    task: SplitTask,
    attack: Attack[SplitTranscript],
    max_rows: int,
    seed: int,
) -> AttackOutcome:
    """Run ``attack`` on the first ``max_rows`` rows of the transcript (whole steps) and
    score it, matched inside the groups the defense formed, beside the auxiliary mean."""
    tr, keep = setting.run.transcript.first_rows(max_rows)
    truth = task.private_x[setting.run.row_index[keep]]
    rec = attack(tr, adversary_knowledge(task), seed=seed)
    groups = transcript_groups(tr.smashed, tr.step)
    base = task.aux.mean(0, keepdim=True).expand_as(truth)
    return AttackOutcome(
        score_reconstruction(rec.inputs, truth, groups),
        score_reconstruction(base, truth),
        rec,
        truth,
    )


def settings_grid(
    sigmas: Sequence[float],
    ks: Sequence[int],
    kd_sigma: float,
    clip: float,
    sketch: int | None = None,
    sketch_refresh: int = 16,
) -> dict[str, SmashedDefenseSpec | None]:
    """Vanilla, DP at each sigma, MDAV at each k, and DP (kd_sigma) + MDAV at each k (MDAV
    exact, or grouped on a tracked ``sketch``-dimensional subspace:
    ``SmashedDefenseSpec.sketch``)."""
    out: dict[str, SmashedDefenseSpec | None] = {"vanilla": None}
    for s in sigmas:
        out[f"dp_s{s:g}"] = SmashedDefenseSpec(k=1, sigma=s, clip=clip)
    for k in ks:
        out[f"mdav_k{k}"] = SmashedDefenseSpec(k=k, sketch=sketch, sketch_refresh=sketch_refresh)
    for k in ks:
        out[f"kd_s{kd_sigma:g}_k{k}"] = SmashedDefenseSpec(
            k=k, sigma=kd_sigma, clip=clip, sketch=sketch, sketch_refresh=sketch_refresh
        )
    return out
