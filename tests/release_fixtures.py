"""Tiny releases for the conformance suite and fast tests (milliseconds to seconds to build).

They live with the tests, not in the library: building a release means running a system
(training, a federated client, an unlearning server), which the attack layer must not import.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from trainleak.attacks.gradient._common import tiny_batch
from trainleak.data import load_digits
from trainleak.defenses.split_learning import KDUFSL
from trainleak.models.registry import build_model, model_spec
from trainleak.models.split import SplitSpec
from trainleak.releases.checkpoint import Checkpoint
from trainleak.releases.collaboration import SharedRepresentations
from trainleak.releases.distilled import DistilledSet
from trainleak.releases.dp import DPTrajectory, PrivateRegression
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_learning import SmashedDefenseSpec, SplitTranscript
from trainleak.releases.unlearning import BroadcastLog, DeletionTranscript
from trainleak.scenarios.distillation_bank import build_shadow_bank
from trainleak.scenarios.probing_client import ProbingClient
from trainleak.systems.collaboration.parties import DCParty, collaborate
from trainleak.systems.distillation import DCConfig, DMConfig, distill
from trainleak.systems.federated.client import fedsgd_update
from trainleak.systems.federated.malicious import malicious_mlp
from trainleak.systems.split_learning import UFSLConfig, UFSLRun, train_ufsl
from trainleak.systems.mechanisms.regression import ridge_output_perturbation, sphere_records
from trainleak.systems.training.config import TrainConfig
from trainleak.systems.training.dp import DPSGDConfig, train_dpsgd
from trainleak.systems.training.loop import train_checkpoint
from trainleak.systems.unlearning.retraining import RandomizedResponse, UnlearningMechanism
from trainleak.systems.unlearning.server import ExactUnlearningServer


def tiny_malicious_update(seed: int = 0, batch: int = 6) -> tuple[GradientUpdate, Knowledge]:
    """A 12-dim batch sent through a 3-group x 8-bin imprint MLP (float64)."""
    public, _ = tiny_batch(200, 12, seed + 100)
    spec, params = malicious_mlp((12,), 3, public, n_groups=3, bins_per_group=8, hidden=8)
    x, y = tiny_batch(batch, 12, seed)
    upd = fedsgd_update(spec, params, x, y)
    return upd, Knowledge(input_shape=(12,), value_range=(0.0, 1.0), active=True)


def tiny_honest_update(seed: int = 0, batch: int = 4) -> tuple[GradientUpdate, Knowledge]:
    """A 12-dim batch through an honest 12-64-3 MLP at initialisation (float64)."""
    spec = model_spec("mlp", input_shape=(12,), hidden=[64], out_dim=3)
    params = {k: v.to(torch.float64) for k, v in build_model(spec, seed=seed).state_dict().items()}
    x, y = tiny_batch(batch, 12, seed)
    upd = fedsgd_update(spec, params, x, y)
    return upd, Knowledge(input_shape=(12,), value_range=(0.0, 1.0))


def tiny_binary_checkpoint(seed: int = 0) -> tuple[Checkpoint, Knowledge]:
    """A 16-16-1 homogeneous MLP trained on 8 random points in [-1, 1]^16 (binary labels)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(8, 1, 4, 4, generator=gen) * 2 - 1
    y = torch.arange(8) % 2
    spec = model_spec("homogeneous_mlp", input_shape=(1, 4, 4), hidden=[16], out_dim=1)
    ckpt, _ = train_checkpoint(spec, x, y, TrainConfig(lr=0.2, steps=200, log_every=100))
    return ckpt, Knowledge(input_shape=(1, 4, 4), value_range=(-1.0, 1.0), label_set=(0, 1))


def tiny_trajectory(
    noise_multiplier: float = 1.0, steps: int = 10, target: int = 3, seed: int = 0
) -> tuple[DPTrajectory, Knowledge]:
    """A 10-step DP-SGD run of a 64-10 logistic regression on 30 digits plus a target.

    The prior is a pool of 20 held-out digits containing the target (index ``target``).
    """

    ds = load_digits()
    others = (ds.x[:30], ds.y[:30])
    pool_x, pool_y = ds.x[100:120], ds.y[100:120]
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[], out_dim=10)
    cfg = DPSGDConfig(
        sampling_rate=0.2, noise_multiplier=noise_multiplier, steps=steps, lr=0.5, seed=seed
    )
    release = train_dpsgd(spec, others, (pool_x[target], pool_y[target]), cfg)
    knowledge = Knowledge(
        input_shape=(1, 8, 8),
        value_range=(0.0, 1.0),
        prior=pool_x,
        labels=pool_y,
        other_records=others,
    )
    return release, knowledge


def tiny_regression(
    rho: float = 1e4, d: int = 8, seed: int = 0
) -> tuple[PrivateRegression, Knowledge]:
    """Private ridge regression on 2d unit-sphere records; the target is the last record."""

    g = torch.Generator().manual_seed(seed)
    x, y = sphere_records(2 * d, d, g)
    release = ridge_output_perturbation(x, y, lam=float(2 * d), rho=rho, generator=g)
    knowledge = Knowledge(
        input_shape=(d,),
        labels=y[-1:],
        other_records=(x[:-1], y[:-1]),
        record_norm=1.0,
    )
    return release, knowledge


def tiny_broadcast_log(
    seed: int = 0, dim: int = 6, n_classes: int = 3, deletions: int = 2, precision: str = "float64"
) -> tuple[BroadcastLog, list[tuple[np.ndarray, int]]]:
    """A server with 20 honest records; unrestricted probes, then single honest deletions.

    Returns:
        The attacker's log and the ground truth ``(phi, label)`` of each deletion, in order.
    """
    rng = np.random.default_rng(seed)
    server = ExactUnlearningServer(dim=dim, n_classes=n_classes, lam=1.0, precision=precision)
    ids = server.add(
        "honest",
        torch.from_numpy(rng.random((20, dim))),
        torch.from_numpy(rng.integers(0, n_classes, 20)),
    )
    client = ProbingClient("mallory", "unrestricted", seed=seed)
    truth = []
    for i in ids[:deletions]:
        client.probe(server)
        truth.append(server.record(i))
        server.delete("honest", [i])
    return server.log_for("mallory"), truth


def tiny_transcript(
    seed: int = 0, n: int = 50, k: int = 5, eps: float = 1.0
) -> tuple[DeletionTranscript, np.ndarray]:
    """Randomized response on ``n`` honest bits plus ``k`` adversarial records, all deleted.

    Returns:
        The transcript (fresh coins) and the honest bits.
    """
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, n)
    mech = UnlearningMechanism(RandomizedResponse(eps), "fresh", seed=seed)
    adv = np.arange(n, n + k)
    mech.fit(np.arange(n + k), np.concatenate([bits, np.zeros(k, dtype=np.int64)]))
    for a in adv:
        mech.delete([int(a)])
    return mech.transcript(adv), bits


def empty_knowledge() -> Knowledge:
    """These attacks need nothing beyond the release."""
    return Knowledge()


def tiny_two_layer_checkpoint(seed: int = 0) -> tuple[Checkpoint, Knowledge]:
    """A 16-24-2 ReLU MLP trained by GD on 4 random points (a conformance fixture)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(4, 1, 4, 4, generator=gen) * 2 - 1
    spec = model_spec("mlp", input_shape=(1, 4, 4), hidden=[24], out_dim=2)
    cfg = TrainConfig(lr=0.2, steps=100, loss="cross_entropy", log_every=50)
    ckpt, _ = train_checkpoint(spec, x, torch.arange(4) % 2, cfg, init_seed=seed)
    return ckpt, Knowledge(input_shape=(1, 4, 4), value_range=(-1.0, 1.0), n_records=4)


def tiny_collaboration(
    seed: int = 0, parties: int = 3, m: int = 4, r: int = 8, n: int = 10
) -> tuple[SharedRepresentations, Knowledge, list[DCParty]]:
    """A tiny noiseless collaboration with participant 0 colluding (discloses the anchor)."""
    rng = np.random.default_rng(seed)
    anchor = rng.standard_normal((r, m))
    ps = [
        DCParty(rng.standard_normal((n, m)), rng.integers(0, 2, n), seed=seed * 100 + i)
        for i in range(parties)
    ]
    release = collaborate(ps, anchor)
    knowledge = Knowledge(disclosures=(ps[0].disclose(0, anchor),))
    return release, knowledge, ps


@lru_cache(maxsize=1)
def tiny_distilled() -> tuple[DistilledSet, Knowledge]:
    """A 1-image-per-class DM set distilled from 200 digits with a small MLP, and an
    adversary with 200 disjoint auxiliary digits, two candidate algorithms and architectures,
    a shadow bank of 8 sets and 40 membership candidates (20 members, 20 not)."""
    ds = load_digits()
    x, y = ds.x[:200], ds.y[:200]
    aux = (ds.x[200:400], ds.y[200:400])
    archs = {
        "mlp": model_spec("mlp", input_shape=(1, 8, 8), hidden=[16], out_dim=10),
        "convnet": model_spec("convnet", input_shape=(1, 8, 8), out_dim=10, width=4),
    }
    configs = {
        "dm": DMConfig(ipc=1, iterations=5),
        "dc": DCConfig(ipc=1, iterations=2, inner_steps=1, net_steps=1),
    }
    release = distill(x, y, 10, archs["mlp"], configs["dm"], seed=5).release
    bank = build_shadow_bank(aux, 10, configs, archs, seeds=(0, 1))
    cand = (torch.cat([x[:20], ds.x[400:420]]), torch.cat([y[:20], ds.y[400:420]]))
    knowledge = Knowledge(
        input_shape=(1, 8, 8),
        value_range=(0.0, 1.0),
        candidate_algorithms=("dc", "dm"),
        candidate_architectures=tuple(archs.values()),
        auxiliary=aux,
        shadow_bank=bank,
        candidates=cand,
    )
    return release, knowledge


@lru_cache(maxsize=4)
def _tiny_split(defense_k: int, sigma: float) -> tuple[UFSLRun, torch.Tensor, torch.Tensor]:
    ds = load_digits()
    clients = [(ds.x[i * 60 : (i + 1) * 60], ds.y[i * 60 : (i + 1) * 60]) for i in range(3)]
    spec = SplitSpec(
        model_spec("split_convnet", input_shape=(1, 8, 8), out_dim=10, channels=[4], hidden=[32]),
        1,
        2,
        (1, 8, 8),
    )
    defense = None
    if defense_k > 1 or sigma > 0:
        clip = 2.0 if sigma > 0 else None
        defense = KDUFSL(SmashedDefenseSpec(k=defense_k, sigma=sigma, clip=clip))
    run = train_ufsl(
        clients, spec, UFSLConfig(rounds=3, batch_size=30, lr=0.05), defense=defense, seed=0
    )
    x_priv = torch.cat([c[0] for c in clients])
    return run, x_priv, ds.x[400:700]


def tiny_split(
    defense_k: int = 1, sigma: float = 0.0
) -> tuple[SplitTranscript, Knowledge, torch.Tensor]:
    """UFSL on 3 clients x 60 digits (head conv 1->4, 256-dim smashed rows), optionally with
    KD-UFSL; knowledge: 300 disjoint auxiliary digits. Returns the transcript, the knowledge
    and the ground truth of every transcript row."""
    run, x_priv, aux = _tiny_split(defense_k, sigma)
    know = Knowledge(prior=aux, value_range=(0.0, 1.0), input_shape=(1, 8, 8))
    return run.transcript, know, x_priv[run.row_index]
