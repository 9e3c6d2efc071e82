"""Federated clients: FedSGD (one gradient over a batch) and FedAvg (several local steps).

References:
    McMahan et al., *Communication-Efficient Learning of Deep Networks from Decentralized
    Data*, AISTATS 2017.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainleak.errors import ConfigError
from trainleak.models.functional import batch_gradient, check_inputs, instantiate, state_of
from trainleak.models.spec import ModelSpec, StateDict
from trainleak.releases.federated import GradientUpdate


def fedsgd_update(
    architecture: ModelSpec,
    parameters: StateDict,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    share_batch_size: bool = True,
) -> GradientUpdate:
    """The FedSGD update of one client: the gradient of its mean loss over ``(x, y)``.

    The computation runs in the dtype of ``parameters`` (pass float64 parameters for the exact
    path); ``x`` is cast to it.

    Args:
        architecture: the model.
        parameters: the broadcast state.
        x: the client's batch ``(B, *input_shape)``.
        y: its labels ``(B,)``.
        share_batch_size: whether the server is told ``B``.

    Returns:
        A :class:`GradientUpdate` with ``kind="gradient"``.
    """
    check_inputs(x, y)
    model = instantiate(architecture, parameters)
    dtype = next(model.parameters()).dtype
    grads = batch_gradient(model, x.to(dtype), y)
    return GradientUpdate(
        architecture=architecture,
        parameters={k: v.detach().clone() for k, v in parameters.items()},
        update=grads,
        batch_size=int(x.shape[0]) if share_batch_size else None,
    )


def fedavg_update(
    architecture: ModelSpec,
    parameters: StateDict,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    local_steps: int,
    learning_rate: float,
    mini_batch: int | None = None,
) -> GradientUpdate:
    """The FedAvg update: ``start - end`` after ``local_steps`` of SGD on the client's data.

    Mini-batches are taken in order (no shuffling) so the server can replay them when it knows
    the hyper-parameters, as in breaching's ``local_updates`` user.

    Args:
        architecture: the model.
        parameters: the broadcast state.
        x: the client's data ``(N, *input_shape)``.
        y: its labels.
        local_steps: number of SGD steps.
        learning_rate: local learning rate.
        mini_batch: samples per step (``None``: all of them each step).

    Returns:
        A :class:`GradientUpdate` with ``kind="delta"``.
    """
    check_inputs(x, y)
    if local_steps < 1:
        raise ConfigError.invalid("local_steps", "a positive integer", local_steps)
    if not learning_rate > 0:
        raise ConfigError.invalid("learning_rate", "a positive number", learning_rate)
    n = int(x.shape[0])
    mb = n if mini_batch is None else int(mini_batch)
    if not 1 <= mb <= n:
        raise ConfigError.invalid("mini_batch", f"an integer in [1, {n}]", mini_batch)
    model = instantiate(architecture, parameters)
    dtype = next(model.parameters()).dtype
    xs = x.to(dtype)
    for step in range(local_steps):
        idx = torch.arange(step * mb, step * mb + mb) % n
        g = batch_gradient(model, xs[idx], y[idx])
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.sub_(learning_rate * g[name])
    end = state_of(model)
    delta = {k: parameters[k].to(dtype) - end[k] for k in end}
    return GradientUpdate(
        architecture=architecture,
        parameters={k: v.detach().clone() for k, v in parameters.items()},
        update=delta,
        batch_size=n,
        local_steps=local_steps,
        learning_rate=learning_rate,
        kind="delta",
    )


@dataclass(frozen=True)
class Client:
    """A client holding private data; it answers a broadcast with an update.

    Attributes:
        x: private inputs.
        y: private labels.
        local_steps: 1 for FedSGD, more for FedAvg.
        learning_rate: local learning rate (FedAvg).
        share_batch_size: whether the server is told how many samples were used.
    """

    x: torch.Tensor
    y: torch.Tensor
    local_steps: int = 1
    learning_rate: float = 0.1
    share_batch_size: bool = True

    def respond(self, architecture: ModelSpec, parameters: StateDict) -> GradientUpdate:
        """Compute this client's update at the broadcast state."""
        if self.local_steps == 1:
            return fedsgd_update(
                architecture,
                parameters,
                self.x,
                self.y,
                share_batch_size=self.share_batch_size,
            )
        return fedavg_update(
            architecture,
            parameters,
            self.x,
            self.y,
            local_steps=self.local_steps,
            learning_rate=self.learning_rate,
        )
