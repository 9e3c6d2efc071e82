"""One-hidden-layer Gaussian-activation MLP on scalar inputs, batched over independent replicas.

The network is f(x) = sum_j v_j exp(-(w_j x + b_j)^2) + c. Neuron ``j`` peaks at its
*prototype* p_j = -b_j / w_j and has width about 1 / |w_j|, so with the width equal to the
training-set size every hidden unit can be read as a candidate training point (Alba and
Lopez-Rubio 2026). Reading the prototypes off the weights is the attack in
:mod:`trainleak.attacks.checkpoint.prototypes`.

Many small studies train hundreds of such networks at once (every seed and loss mask of one
data-set size), so the module holds ``n_models`` independent replicas as a leading batch
dimension: parameters are ``(n_models, n_hidden)``, and :meth:`GaussianMLP.forward_batched`
takes one data set per replica. With ``n_models == 1`` the module is an ordinary regression
model: :meth:`GaussianMLP.forward` maps ``(n, 1)`` inputs to ``(n, 1)`` outputs.

References:
    Alba and Lopez-Rubio, "From Latent Space to Training Data: Explainable Specialization in
    Minimal MLPs", arXiv 2605.25939, 2026 (model and losses; their forms are [inferred] from
    the abstract, see ``../shared/docs/seed-briefs-2.md`` section 11).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.registry import register_model


def gaussian(u: torch.Tensor) -> torch.Tensor:
    """The activation phi(u) = exp(-u^2)."""
    return torch.exp(-(u**2))


class GaussianMLP(nn.Module):
    """f(x) = sum_j v_j exp(-(w_j x + b_j)^2) + c, for ``n_models`` independent replicas.

    Initialisation [inferred from the brief]: prototypes on a jittered grid over
    ``init_range`` (one uniform draw inside each of ``n_hidden`` equal cells), slopes
    w_j ~ U[w_min, w_max], b_j = -w_j p_j, output weights v_j ~ N(0, 1 / n_hidden), c = 0.

    Args:
        n_hidden: hidden width (the study sets it to the training-set size).
        n_models: number of independent replicas held as a batch dimension.
        init_range: the interval the initial prototypes cover (the data's range).
        w_min: lower end of the initial slope distribution.
        w_max: upper end of the initial slope distribution.

    Raises:
        ConfigError: for a non-positive width or replica count, an empty ``init_range`` or
            slopes outside ``0 < w_min <= w_max``.

    Example:
        >>> m = GaussianMLP(n_hidden=4, n_models=2)
        >>> m.prototypes().shape
        torch.Size([2, 4])
        >>> m(torch.zeros(3, 1)).shape
        torch.Size([3, 2])
    """

    def __init__(
        self,
        n_hidden: int,
        n_models: int = 1,
        init_range: Sequence[float] = (0.0, 1.0),
        w_min: float = 5.0,
        w_max: float = 20.0,
    ) -> None:
        super().__init__()
        if int(n_hidden) < 1:
            raise ConfigError.invalid("n_hidden", "an integer >= 1", n_hidden)
        if int(n_models) < 1:
            raise ConfigError.invalid("n_models", "an integer >= 1", n_models)
        lo, hi = (float(v) for v in init_range)
        if not hi > lo:
            raise ConfigError.invalid("init_range", "(low, high) with high > low", init_range)
        if not 0 < w_min <= w_max:
            raise ConfigError.invalid("w_min/w_max", "0 < w_min <= w_max", (w_min, w_max))
        self.n_hidden, self.n_models = int(n_hidden), int(n_models)
        self.init_range, self.w_min, self.w_max = (lo, hi), float(w_min), float(w_max)
        shape = (self.n_models, self.n_hidden)
        self.w = nn.Parameter(torch.empty(shape))
        self.b = nn.Parameter(torch.empty(shape))
        self.v = nn.Parameter(torch.empty(shape))
        self.c = nn.Parameter(torch.zeros(self.n_models))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw the initial weights (global RNG unless a ``generator`` is given)."""
        lo, hi = self.init_range
        shape = (self.n_models, self.n_hidden)
        with torch.no_grad():
            cells = torch.arange(self.n_hidden, dtype=torch.float32) / self.n_hidden
            jitter = torch.rand(shape, generator=generator) / self.n_hidden
            protos = lo + (hi - lo) * (cells + jitter)
            self.w.copy_(
                self.w_min + (self.w_max - self.w_min) * torch.rand(shape, generator=generator)
            )
            self.b.copy_(-self.w * protos)
            self.v.copy_(torch.randn(shape, generator=generator) / self.n_hidden**0.5)
            self.c.zero_()

    def prototypes(self) -> torch.Tensor:
        """The peak positions p_j = -b_j / w_j, shape ``(n_models, n_hidden)``."""
        return -self.b / self.w

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """Hidden responses H[m, i, j] = exp(-(w_mj x_mi + b_mj)^2) for ``x`` of shape (M, n)."""
        self._check_batched(x)
        return gaussian(x.unsqueeze(-1) * self.w.unsqueeze(1) + self.b.unsqueeze(1))

    def forward_batched(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs ``(n_models, n)`` for one data set per replica, ``x`` of shape (M, n)."""
        return (self.hidden(x) * self.v.unsqueeze(1)).sum(-1) + self.c.unsqueeze(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs ``(n, n_models)`` of every replica on shared inputs ``x`` of shape (n, 1)."""
        if x.ndim != 2 or x.shape[1] != 1:
            raise ShapeError(f"GaussianMLP takes inputs of shape (n, 1), received {tuple(x.shape)}")
        shared = x[:, 0].unsqueeze(0).expand(self.n_models, -1)
        return self.forward_batched(shared).T

    def _check_batched(self, x: torch.Tensor) -> None:
        if x.ndim != 2 or x.shape[0] != self.n_models:
            raise ShapeError(
                f"expected inputs of shape (n_models={self.n_models}, n), received {tuple(x.shape)}"
            )

    def replica_state(self, index: int) -> dict[str, torch.Tensor]:
        """The state dict of replica ``index`` alone (a ``n_models=1`` network)."""
        if not 0 <= index < self.n_models:
            raise ConfigError.invalid("index", f"an integer in [0, {self.n_models})", index)
        return {k: v.detach()[index : index + 1].clone() for k, v in self.state_dict().items()}


register_model("gaussian_mlp", GaussianMLP)
