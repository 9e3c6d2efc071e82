"""Training a random-features model in closed form, released as a checkpoint (seed 12).

Only the last layer is trained (minimum-norm least squares); the first layer stays at its
random initialisation, so the checkpoint's initial and final first layers coincide.
"""

from __future__ import annotations

import torch

from trainleak.errors import ShapeError
from trainleak.models.random_features import Activation, RandomFeatures
from trainleak.models.registry import build_model, model_spec
from trainleak.releases.checkpoint import Checkpoint, OptimizerSpec, TrainingSpec


def random_features_checkpoint(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    width: int,
    activation: Activation = "relu_tanh",
    init_seed: int = 0,
) -> Checkpoint:
    """Fit a random-feature model by minimum-norm interpolation from its initialisation.

    The last layer becomes a_T = a_0 + Phi^T (Phi Phi^T)^+ (Y - Phi a_0), the limit of
    gradient descent on the squared loss from a_0 (computed in float64, stored in float32).

    Args:
        x: inputs ``(n, *input_shape)``.
        y: targets ``(n,)`` or ``(n, C)``.
        width: number of random features.
        activation: the feature activation.
        init_seed: seed of W and a_0 (the attacker knows it, so it knows theta_0).

    Returns:
        A :class:`Checkpoint` with initial and final weights (the first layer is unchanged).

    Raises:
        ShapeError: when ``x`` and ``y`` disagree in length.
    """
    if x.shape[0] != y.shape[0]:
        raise ShapeError(f"x has {x.shape[0]} samples but y has {y.shape[0]}")
    targets = y.reshape(len(y), -1).double()
    spec = model_spec(
        "random_features",
        input_shape=tuple(x.shape[1:]),
        width=width,
        out_dim=targets.shape[1],
        activation=activation,
    )
    model = build_model(spec, seed=init_seed)
    if not isinstance(model, RandomFeatures):
        raise TypeError(f"model kind {spec.kind!r} did not build RandomFeatures")
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        phi = model.features(x).double()
        a0 = model.last.weight.double()
        resid = targets - phi @ a0.T
        a_t = a0 + (torch.linalg.pinv(phi) @ resid).T
        model.last.weight.copy_(a_t.float())
        final_mse = float(((model(x).double() - targets) ** 2).mean())
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return Checkpoint(
        architecture=spec,
        final=final,
        initial=initial,
        optimizer=OptimizerSpec(name="gd", lr=0.0, params={"solver": "min_norm_closed_form"}),
        training=TrainingSpec(loss="mse", steps=0, n_train=len(x), final_loss=final_mse),
    )
