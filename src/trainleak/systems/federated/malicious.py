"""Malicious imprint layers: cumulative bins along projections, and reading them back.

A malicious server sets the first fully connected layer so that every neuron of *group* l has
the same weight row ``r_l`` (a unit projection) and a bias ``-t_k`` at the k-th quantile of
``r_l^T x`` under public data. Neuron k fires for every sample whose projection exceeds ``t_k``,
so consecutive rows differ by exactly the samples in bin ``(t_k, t_{k+1}]`` (*cumulative bins*,
Fowl et al. 2022). The next layer gives all neurons of a group the same outgoing weights, so
the pre-activation gradient is one number per (sample, group), and a bin holding one sample
gives ``x = dW_k / db_k`` exactly.

With one group this is Robbing the Fed's imprint block. With several groups on different
projections every sample lands in one bin per group: the layer becomes an erasure code that
:mod:`trainleak.attacks.gradient.erasure` decodes by peeling.

References:
    Fowl, Geiping, Czaja, Goldblum, Goldstein, *Robbing the Fed: Directly Obtaining Private
    Data in Federated Learning with Modified Models*, ICLR 2022, Sec. 3.
    Luby, Mitzenmacher, Shokrollahi, Spielman, *Efficient Erasure Correcting Codes*, IEEE
    Trans. Inf. Theory 2001 (peeling decoders).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from trainleak.errors import ConfigError
from trainleak.models.registry import build_model, model_spec
from trainleak.models.spec import ModelSpec, StateDict

Projection = Literal["gaussian", "pca"]


def _projections(
    public: torch.Tensor, n_groups: int, kind: Projection, gen: torch.Generator
) -> torch.Tensor:
    d = public.shape[1]
    if kind == "gaussian":
        r = torch.randn(n_groups, d, generator=gen, dtype=torch.float64)
    else:
        centred = public - public.mean(0)
        _, _, vh = torch.linalg.svd(centred[: min(len(centred), 2000)], full_matrices=False)
        if vh.shape[0] < n_groups:
            raise ConfigError.invalid("n_groups", f"at most {vh.shape[0]} for PCA", n_groups)
        signs = torch.randint(0, 2, (n_groups, 1), generator=gen).to(torch.float64) * 2 - 1
        r = vh[:n_groups] * signs
    return r / r.norm(dim=1, keepdim=True)


def imprint_first_layer(
    public_x: torch.Tensor,
    *,
    n_groups: int,
    bins_per_group: int,
    projection: Projection = "gaussian",
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """First-layer weight ``(n_groups * bins, d)`` and bias of a cumulative-bin imprint layer.

    Thresholds sit at the quantiles ``k / bins`` (k = 1..bins-1) of each projection over the
    public data; the lowest neuron of a group has its threshold far below every public sample,
    so every sample fires it and no sample is invisible to a group [inferred design choice].

    Args:
        public_x: public samples ``(n, *input_shape)`` the server may use.
        n_groups: number of groups L (1 = Robbing the Fed).
        bins_per_group: neurons (= bins) per group K.
        projection: ``"gaussian"`` (random unit vectors) or ``"pca"`` (top principal axes).
        seed: seed of the projections.

    Returns:
        ``(weight, bias)`` in float64.

    Raises:
        ConfigError: bad counts, or fewer than two public samples.
    """
    if n_groups < 1:
        raise ConfigError.invalid("n_groups", "a positive integer", n_groups)
    if bins_per_group < 2:
        raise ConfigError.invalid("bins_per_group", "an integer >= 2", bins_per_group)
    pub = public_x.reshape(public_x.shape[0], -1).to(torch.float64)
    if pub.shape[0] < 2:
        raise ConfigError.invalid("public_x", "at least two public samples", pub.shape[0])
    gen = torch.Generator().manual_seed(seed)
    r = _projections(pub, n_groups, projection, gen)
    weights, biases = [], []
    levels = torch.arange(1, bins_per_group, dtype=torch.float64) / bins_per_group
    for ell in range(n_groups):
        s = pub @ r[ell]
        spread = float(s.max() - s.min()) or 1.0
        t = torch.cat([(s.min() - spread).reshape(1), torch.quantile(s, levels)])
        weights.append(r[ell].expand(bins_per_group, -1))
        biases.append(-t)
    return torch.cat(weights), torch.cat(biases)


def malicious_mlp(
    input_shape: Sequence[int],
    n_classes: int,
    public_x: torch.Tensor,
    *,
    n_groups: int,
    bins_per_group: int,
    hidden: int = 32,
    projection: Projection = "gaussian",
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> tuple[ModelSpec, StateDict]:
    """An MLP ``d -> L*K (imprint) -> hidden -> n_classes`` as a malicious server sets it.

    The second layer gives every neuron of a group one random outgoing weight per hidden unit,
    rescaled so that its pre-activations have unit spread on public data (keeps the softmax
    out of saturation, so per-sample gradients stay well above rounding).

    Args:
        input_shape: shape of one input.
        n_classes: number of classes.
        public_x: public samples used for projections and quantiles.
        n_groups: groups L.
        bins_per_group: bins K per group.
        hidden: width of the layer after the imprint layer.
        projection: see :func:`imprint_first_layer`.
        seed: seed of every random choice.
        dtype: dtype of the returned state (float64 for exact recovery).

    Returns:
        ``(spec, parameters)``.
    """
    w0, b0 = imprint_first_layer(
        public_x, n_groups=n_groups, bins_per_group=bins_per_group, projection=projection, seed=seed
    )
    m = n_groups * bins_per_group
    spec = model_spec("mlp", input_shape=tuple(input_shape), hidden=[m, hidden], out_dim=n_classes)
    state = {k: v.to(torch.float64) for k, v in build_model(spec, seed=seed).state_dict().items()}
    gen = torch.Generator().manual_seed(seed + 1)
    a = torch.randn(hidden, n_groups, generator=gen, dtype=torch.float64)
    w1 = a.repeat_interleave(bins_per_group, dim=1)
    pub = public_x.reshape(public_x.shape[0], -1).to(torch.float64)
    z = torch.relu(pub @ w0.T + b0) @ w1.T
    w1 = w1 / max(float(z.std()), 1e-12)
    state.update(
        {
            "layers.0.weight": w0,
            "layers.0.bias": b0,
            "layers.1.weight": w1,
            "layers.1.bias": torch.zeros(hidden, dtype=torch.float64),
        }
    )
    return spec, {k: v.to(dtype) for k, v in state.items()}
