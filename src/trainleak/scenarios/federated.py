"""One measured cell of a FedSGD recovery study (shared by the experiment and the benchmark).

A cell draws a private batch, lets a client compute its update, runs an attack on it and
scores the result against the batch with :func:`score_exact_recovery`. Times are wall
seconds: ``client_s`` is the client's gradient computation alone (model already built),
``attack_s`` the whole attack call.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from trainleak.attacks.base import Attack, Reconstruction
from trainleak.attacks.gradient.erasure import ErasureDecodingActive
from trainleak.attacks.gradient.imprint import ImprintAttack
from trainleak.metrics.exact_recovery import score_exact_recovery
from trainleak.models.functional import batch_gradient, instantiate
from trainleak.models.registry import build_model, model_spec
from trainleak.models.spec import ModelSpec, StateDict
from trainleak.releases.federated import GradientUpdate
from trainleak.releases.knowledge import Knowledge
from trainleak.systems.federated.client import fedsgd_update
from trainleak.systems.federated.data import Pool
from trainleak.systems.federated.design import choose_groups
from trainleak.systems.federated.malicious import malicious_mlp
from trainleak.systems.training import TrainConfig, train


def client_seconds(update: GradientUpdate, x: torch.Tensor, y: torch.Tensor) -> float:
    """Time of the client's gradient over its batch (the yardstick of attack cost)."""
    model = instantiate(update.architecture, update.parameters)
    xs = x.to(update.dtype)
    start = time.perf_counter()
    batch_gradient(model, xs, y)
    return time.perf_counter() - start


def measure(
    attack: Attack[Any],
    update: GradientUpdate,
    knowledge: Knowledge,
    x: torch.Tensor,
    y: torch.Tensor,
    seed: int = 0,
) -> tuple[dict[str, Any], Reconstruction]:
    """Run ``attack`` and score it; return a table row and the reconstruction."""
    rec = attack(update, knowledge, seed=seed)
    scores = score_exact_recovery(x, y, rec)
    row: dict[str, Any] = {"attack": attack.name, **scores.as_dict(), "attack_s": rec.seconds}
    row["batch_certified"] = bool(rec.diagnostics.get("batch_certified", False))
    return row, rec


def active_cell(
    pool: Pool,
    batch_size: int,
    *,
    neurons: int,
    n_groups: int | None = None,
    hidden: int = 32,
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Erasure decoding (``n_groups`` groups) against imprint (one group), same neuron count.

    ``n_groups=None`` lets the server choose the count for this batch size and neuron budget
    (:func:`~trainleak.systems.federated.design.choose_groups`: one group when the budget
    is too small for peeling to pay). ``neurons`` is rounded up to a multiple of the count;
    both layers get that many.
    """
    if n_groups is None:
        n_groups = choose_groups(batch_size, neurons)

    gen = torch.Generator().manual_seed(seed * 7919 + batch_size)
    x, y = pool.batch(batch_size, gen)
    x = x.to(dtype)
    bins = math.ceil(neurons / n_groups)
    knowledge = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0), active=True)
    rows = []
    for groups, per, attack in (
        (n_groups, bins, ErasureDecodingActive()),
        (1, bins * n_groups, ImprintAttack()),
    ):
        spec, params = malicious_mlp(
            pool.input_shape,
            pool.n_classes,
            pool.public_x,
            n_groups=groups,
            bins_per_group=per,
            hidden=hidden,
            seed=seed,
            dtype=dtype,
        )
        update = fedsgd_update(spec, params, x, y)
        row, _ = measure(attack, update, knowledge, x, y, seed)
        row.update(dataset=pool.name, B=batch_size, neurons=groups * per, groups=groups)
        row["client_s"] = client_seconds(update, x, y)
        row["time_ratio"] = row["attack_s"] / max(row["client_s"], 1e-9)
        rows.append(row)
    return rows


def trained_mlp(
    pool: Pool,
    *,
    width: int,
    steps: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> tuple[ModelSpec, StateDict]:
    """An honest MLP ``d -> width -> classes`` trained by SGD on the public part of the pool."""
    spec = model_spec("mlp", input_shape=pool.input_shape, hidden=[width], out_dim=pool.n_classes)
    model = build_model(spec, seed=seed)
    if steps > 0:
        cfg = TrainConfig(
            optimizer="sgd",
            lr=0.1,
            momentum=0.9,
            steps=steps,
            batch_size=64,
            loss="cross_entropy",
            seed=seed,
        )
        train(model, pool.public_x, pool.public_y, cfg)
    return spec, {k: v.detach().to(dtype) for k, v in model.state_dict().items()}


def passive_cell(
    pool: Pool,
    spec: ModelSpec,
    params: StateDict,
    batch_size: int,
    attacks: list[Attack[Any]],
    *,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Run honest-server attacks on one FedSGD update of ``(spec, params)``."""
    dtype = next(iter(params.values())).dtype
    gen = torch.Generator().manual_seed(seed * 7919 + batch_size + 1)
    x, y = pool.batch(batch_size, gen)
    x = x.to(dtype)
    update = fedsgd_update(spec, params, x, y)
    client_s = client_seconds(update, x, y)
    knowledge = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0))
    rows = []
    for attack in attacks:
        row, _ = measure(attack, update, knowledge, x, y, seed)
        row.update(dataset=pool.name, B=batch_size, neurons=int(params["layers.0.bias"].numel()))
        row.update(client_s=client_s, time_ratio=row["attack_s"] / max(client_s, 1e-9))
        rows.append(row)
    return rows
