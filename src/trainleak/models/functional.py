"""Functional pieces shared by clients, servers and gradient attacks.

Everything here works on an ``nn.Module`` built in the dtype of the release (float64 for the
exact path) and never touches global state. Per-sample gradients use :mod:`torch.func`
(``vmap`` over ``grad`` of ``functional_call``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.mlp import MLP, HomogeneousMLP
from trainleak.models.registry import build_model
from trainleak.models.spec import ModelSpec, StateDict


def instantiate(architecture: ModelSpec, parameters: StateDict) -> nn.Module:
    """Build ``architecture`` in the dtype of ``parameters`` and load them bit for bit.

    Args:
        architecture: the model spec.
        parameters: the state dict (all tensors of one floating dtype).

    Returns:
        The model, on CPU, in the parameters' dtype.
    """
    dtype = next(iter(parameters.values())).dtype
    model = build_model(architecture, seed=0).to(dtype)
    model.load_state_dict(parameters)
    return model


def state_of(model: nn.Module) -> StateDict:
    """A detached copy of the model's parameters (no buffers), by name."""
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def batch_gradient(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> StateDict:
    """Gradient of the mean cross-entropy over ``(x, y)`` (a FedSGD update).

    Args:
        model: the model at the broadcast state.
        x: inputs ``(B, *input_shape)`` in the model's dtype.
        y: labels ``(B,)``.

    Returns:
        The gradient, by parameter name.
    """
    names, params = zip(*model.named_parameters())
    loss = F.cross_entropy(model(x), y)
    grads = torch.autograd.grad(loss, params)
    return {n: g.detach() for n, g in zip(names, grads)}


def sum_gradient(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> StateDict:
    """Sum over samples of the per-sample cross-entropy gradients, in one backward pass."""
    names, params = zip(*model.named_parameters())
    loss = F.cross_entropy(model(x), y, reduction="sum")
    grads = torch.autograd.grad(loss, params)
    return {n: g.detach() for n, g in zip(names, grads)}


def per_sample_gradients(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, chunk: int = 256
) -> StateDict:
    """Per-sample cross-entropy gradients with ``torch.func.vmap(grad(...))``.

    Args:
        model: the model.
        x: inputs ``(B, *input_shape)``.
        y: labels ``(B,)``.
        chunk: samples per vmap call (bounds memory).

    Returns:
        For each parameter name, a tensor ``(B, *param_shape)``.

    Example:
        >>> import torch
        >>> from trainleak.models import MLP
        >>> m = MLP((3,), [4], 2)
        >>> g = per_sample_gradients(m, torch.randn(5, 3), torch.tensor([0, 1, 0, 1, 1]))
        >>> tuple(g["layers.0.weight"].shape)
        (5, 4, 3)
    """
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_one(p: StateDict, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per = vmap(grad(loss_one), in_dims=(None, 0, 0), chunk_size=chunk)
    return dict(per(params, x, y))


def state_norm(state: StateDict) -> float:
    """Euclidean norm of all entries of a state dict."""
    return float(sum(float((v.double() ** 2).sum()) for v in state.values()) ** 0.5)


class FirstLayerSplit:
    """A fully connected model seen as ``tail(first(x))`` at the first layer's pre-activation.

    Gradient attacks read the first layer's gradient ``dL/dW1 = delta x^T`` where ``delta`` is
    the gradient with respect to the pre-activation; this class computes ``delta`` for many
    (input, label) pairs at once.

    Args:
        model: a :class:`~trainleak.models.MLP`, or a :class:`~trainleak.models.HomogeneousMLP`
            with a first-layer bias.

    Raises:
        ConfigError: the model has no fully connected first layer with a bias.
    """

    def __init__(self, model: nn.Module) -> None:
        if not isinstance(model, MLP | HomogeneousMLP):
            raise ConfigError.invalid(
                "architecture", "an MLP (a fully connected first layer)", type(model).__name__
            )
        first = model.layers[0]
        if not isinstance(first, nn.Linear) or first.bias is None:
            raise ConfigError.invalid("architecture", "a first layer with a bias", "no bias")
        self.model = model
        self.first: nn.Linear = first
        self.weight_key, self.bias_key = "layers.0.weight", "layers.0.bias"
        self.width = int(first.out_features)
        self.in_dim = int(first.in_features)

    @staticmethod
    def missing(key: str, kind: str) -> ConfigError:
        """The error for an architecture without the fully connected first layers needed."""
        return ConfigError.invalid(
            "architecture", f"an MLP whose state has {key!r}", f"architecture {kind!r}"
        )

    def pre_activation(self, x: torch.Tensor) -> torch.Tensor:
        """First-layer pre-activation ``W1 x + b1`` of flattened inputs ``(n, d)``."""
        with torch.no_grad():
            return self.first(x.reshape(x.shape[0], -1))

    def tail(self, h: torch.Tensor) -> torch.Tensor:
        """Logits from first-layer pre-activations."""
        layers = self.model.layers
        for layer in layers[1:]:
            h = layer(torch.relu(h))
        return h

    def deltas(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """``dl/dh1`` of each input under each label (per-sample, unaveraged).

        Args:
            x: flattened inputs ``(n, d)``.
            labels: the labels to try, ``(C,)``.

        Returns:
            ``(n, C, width)``: entry ``[i, c]`` is the pre-activation gradient of
            ``cross_entropy(model(x_i), labels[c])``.
        """
        h = self.pre_activation(x)
        if len(self.model.layers) < 2:
            return self._direct_deltas(h, labels)
        g = self.upper_gradients(h, labels)  # (n, C, n_2)
        w2 = self._second().weight.detach()
        return (g @ w2) * (h > 0).to(h.dtype).unsqueeze(1)

    def deltas_at(self, h: torch.Tensor, labels: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """The entries ``cols`` (``(n, k)``, per input) of :meth:`deltas`, from the first-layer
        pre-activations ``h`` (``(n, width)``), without forming the others: ``(n, C, k)``."""
        if len(self.model.layers) < 2:
            full = self._direct_deltas(h, labels)
            return full.gather(2, cols.unsqueeze(1).expand(-1, full.shape[1], -1))
        g = self.upper_gradients(h, labels)  # (n, C, n_2)
        w = self._second().weight.detach().T[cols]  # (n, k, n_2)
        mask = (h.gather(1, cols) > 0).to(h.dtype)
        return (g @ w.transpose(1, 2)) * mask.unsqueeze(1)

    def upper_gradients(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Gradient of ``cross_entropy`` with respect to the second layer's output, for every
        input (first-layer pre-activations ``h``, ``(n, width)``) under every label,
        ``(n, C, n_2)``; the layers above the second run once per (input, label) pair."""
        second = self._second()
        with torch.no_grad():
            z = second(torch.relu(h))
        n, c = z.shape[0], labels.shape[0]
        zz = z.unsqueeze(1).expand(n, c, z.shape[1]).reshape(n * c, z.shape[1])
        zz = zz.clone().requires_grad_(True)
        out = zz
        for layer in self.model.layers[2:]:
            out = layer(torch.relu(out))
        loss = F.cross_entropy(out, labels.repeat(n), reduction="sum")
        (g,) = torch.autograd.grad(loss, zz)
        return g.reshape(n, c, z.shape[1])

    def _direct_deltas(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """:meth:`deltas` through autograd on every (input, label) pair (any tail)."""
        n, c = h.shape[0], labels.shape[0]
        hh = h.unsqueeze(1).expand(n, c, self.width).reshape(n * c, self.width)
        hh = hh.clone().requires_grad_(True)
        loss = F.cross_entropy(self.tail(hh), labels.repeat(n), reduction="sum")
        (d,) = torch.autograd.grad(loss, hh)
        return d.reshape(n, c, self.width)

    def _second(self) -> nn.Linear:
        second = self.model.layers[1]
        if not isinstance(second, nn.Linear):
            raise ConfigError.invalid("architecture", "a second fully connected layer", second)
        return second

    def labelled_deltas(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``dl/dh1`` of each ``(x_i, y_i)`` pair, ``(n, width)``."""
        h = self.pre_activation(x).clone().requires_grad_(True)
        loss = F.cross_entropy(self.tail(h), y, reduction="sum")
        (d,) = torch.autograd.grad(loss, h)
        return d


def sum_gradient_and_deltas(
    split: FirstLayerSplit, x: torch.Tensor, y: torch.Tensor
) -> tuple[StateDict, torch.Tensor]:
    """:func:`sum_gradient` and, from the same backward pass, ``dl/dh1`` of every sample
    (:meth:`FirstLayerSplit.labelled_deltas`), ``(n, width)``."""
    names, params = zip(*split.model.named_parameters())
    h = split.first(x.reshape(x.shape[0], -1))
    loss = F.cross_entropy(split.tail(h), y, reduction="sum")
    *grads, d = torch.autograd.grad(loss, [*params, h])
    return {n: g.detach() for n, g in zip(names, grads)}, d.detach()


def check_inputs(x: torch.Tensor, y: torch.Tensor) -> None:
    """Raise :class:`ShapeError` unless ``x`` and ``y`` describe the same number of samples."""
    if y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ShapeError(
            f"x has {x.shape[0]} samples and y has shape {tuple(y.shape)}; expected y of "
            f"shape ({x.shape[0]},)"
        )


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
