"""The two-layer network change ``theta_T - theta_0`` that the init+final attacks match (seed 12).

:class:`TwoLayerChange` reads a released two-layer MLP (or random-features model) and computes,
for candidate inputs, the Gram matrix and inner products that the projection loss needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainleak.errors import ConfigError
from trainleak.models.random_features import activation_fn, activation_grad
from trainleak.releases.checkpoint import Checkpoint

SUPPORTED = ("mlp", "homogeneous_mlp", "random_features")


@dataclass(frozen=True)
class TwoLayerChange:
    """A released two-layer network sigma(x W1^T + b1) W2^T + b2 at theta_0 and theta_T (float64).

    Tensors are ``(initial, final)`` pairs; absent biases are ``None``.
    """

    w1: tuple[torch.Tensor, torch.Tensor]
    b1: tuple[torch.Tensor, torch.Tensor] | None
    w2: tuple[torch.Tensor, torch.Tensor]
    b2: tuple[torch.Tensor, torch.Tensor] | None
    activation: str

    @property
    def input_dim(self) -> int:
        return int(self.w1[1].shape[1])

    @classmethod
    def from_checkpoint(cls, ckpt: Checkpoint) -> TwoLayerChange:
        """Read a one-hidden-layer ``mlp``/``homogeneous_mlp`` (ReLU) or ``random_features``.

        Raises:
            ConfigError: another architecture, more than one hidden layer, or no initial
                weights in the release.
        """
        kind = ckpt.architecture.kind
        names = ("first", "last") if kind == "random_features" else ("layers.0", "layers.1")
        if (
            kind not in SUPPORTED
            or f"{names[1]}.weight" not in ckpt.final
            or any(k.startswith("layers.2.") for k in ckpt.final)
        ):
            raise ConfigError(
                "parameter-change matching supports two-layer networks (one hidden layer): "
                f"architecture kinds {list(SUPPORTED)} with ReLU (or the random-feature "
                f"activations); the checkpoint is {kind!r} with tensors {sorted(ckpt.final)}"
            )
        if ckpt.initial is None:
            raise ConfigError(
                "parameter-change matching needs the initial weights: the checkpoint has "
                "initial=None (release theta_0, or the seed it was drawn from)"
            )
        init, final = ckpt.initial, ckpt.final

        def pair(key: str) -> tuple[torch.Tensor, torch.Tensor] | None:
            if key not in final:
                return None
            return init[key].detach().double(), final[key].detach().double()

        w1, w2 = pair(f"{names[0]}.weight"), pair(f"{names[1]}.weight")
        if w1 is None or w2 is None:
            raise RuntimeError("internal invariant violated: w1 is not None and w2 is not None")
        act = str(ckpt.architecture.kwargs.get("activation", "relu"))
        return cls(w1, pair(f"{names[0]}.bias"), w2, pair(f"{names[1]}.bias"), act)

    def first_layer_delta(self) -> torch.Tensor:
        """W1_T - W1_0, shape ``(m, d)``: its rows lie in the span of the training inputs."""
        return self.w1[1] - self.w1[0]

    def gram_and_inner(
        self, x: torch.Tensor, *, params: str, at: str
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """K, V and ||dtheta||^2 of :func:`projection_loss` for candidates ``x`` ``(n, d)``.

        ``params="last"``: features h = sigma(W1 x + b1) (+1 for b2), shared by the C output
        rows. ``params="all"``: one gradient per (candidate, output); with G_ic = W2[c] *
        sigma'(z_i), K = (X X^T + 1) o (G G^T) + (H H^T + 1) kron I_C, never forming the
        p-dimensional gradients.
        """
        j = 0 if at == "init" else 1
        z = x @ self.w1[j].T + (self.b1[j] if self.b1 is not None else 0.0)
        h = activation_fn(self.activation, z)
        dw2 = self.w2[1] - self.w2[0]
        one2 = 1.0 if self.b2 is not None else 0.0
        db2 = self.b2[1] - self.b2[0] if self.b2 is not None else torch.zeros(dw2.shape[0])
        v_last = h @ dw2.T + db2.double()
        delta_sq = (dw2**2).sum() + (db2.double() ** 2).sum()
        if params == "last":
            return h @ h.T + one2, v_last, delta_sq
        n, c = x.shape[0], dw2.shape[0]
        g = activation_grad(self.activation, z).unsqueeze(1) * self.w2[j].unsqueeze(0)
        dw1 = self.first_layer_delta()
        one1 = 1.0 if self.b1 is not None else 0.0
        u = x @ dw1.T + (self.b1[1] - self.b1[0] if self.b1 is not None else 0.0)
        inner = ((g * u.unsqueeze(1)).sum(-1) + v_last).reshape(n * c, 1)
        gf = g.reshape(n * c, -1)
        ones, eye = torch.ones(c, c, dtype=x.dtype), torch.eye(c, dtype=x.dtype)
        gram = torch.kron(x @ x.T + one1, ones) * (gf @ gf.T) + torch.kron(h @ h.T + one2, eye)
        delta_sq = delta_sq + (dw1**2).sum()
        if self.b1 is not None:
            delta_sq = delta_sq + ((self.b1[1] - self.b1[0]) ** 2).sum()
        return gram, inner, delta_sq
