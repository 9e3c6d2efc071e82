"""The classifier simulator: train a white-box classifier on the private classes with a
training-time defense, and publish it as a :class:`ClassifierRelease`.

Adam with a constant learning rate on random minibatches (AT-AT's training uses Adam, lr 1e-3).
The "memorising" model of seed 8 is :class:`~.defenses.Standard` trained long with no weight
decay; the drop-layer model is the ``masked_mlp`` architecture.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.fitting import accuracy
from trainleak.models.registry import build_model, model_spec
from trainleak.models.spec import ModelSpec
from trainleak.releases.classifier import ClassifierRelease
from trainleak.systems.classifier.defenses import Defense, Standard, TransferFreeze
from trainleak.validation import check_fields, param


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    """Optimiser settings.

    Attributes:
        steps: Adam steps.
        lr: learning rate.
        batch_size: minibatch size.
        weight_decay: L2 weight decay (0 for the memorising model).
        flip: train on random horizontal mirror images too (each image of a batch mirrored
            with probability 1/2; the standard augmentation of face classifiers, off for
            digits, whose mirror images are not digits of the same class).
    """

    steps: int = param(600, ge=1, integer=True)
    lr: float = param(1e-3, gt=0)
    batch_size: int = param(128, ge=1, integer=True)
    weight_decay: float = param(0.0, ge=0)
    flip: bool = False

    def __post_init__(self) -> None:
        check_fields(self)

    def __repr__(self) -> str:
        """The dataclass repr, without ``flip`` when it is off: content-hash cache keys of
        models trained before the field existed stay valid."""
        shown = [f for f in fields(self) if f.name != "flip" or self.flip]
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in shown)
        return f"{type(self).__name__}({inner})"


@dataclass(frozen=True)
class TrainedClassifier:
    """A trained target: the release and what training measured.

    Attributes:
        release: the published classifier.
        train_accuracy: accuracy on its own training set.
    """

    release: ClassifierRelease
    train_accuracy: float


def _mirror(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Each image of ``x`` mirrored horizontally with probability 1/2 (draws from ``gen``)."""
    flip = torch.rand(len(x), generator=gen, device=gen.device) < 0.5
    return torch.where(flip.to(x.device)[:, None, None, None], x.flip(-1), x)


def _loop(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    defense: Defense,
    settings: TrainSettings,
    box: tuple[float, float],
    gen: torch.Generator,
) -> None:
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=settings.lr, weight_decay=settings.weight_decay)
    n = len(x)
    for step in range(settings.steps):
        idx = torch.randperm(n, generator=gen, device=gen.device)[: settings.batch_size]
        idx = idx.to(x.device)
        xb = _mirror(x[idx], gen) if settings.flip else x[idx]
        model.train()
        loss = defense.at_step(step, settings.steps).loss(model, xb, y[idx], box, gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def _transfer(
    spec: ModelSpec,
    model: nn.Module,
    public: tuple[torch.Tensor, torch.Tensor],
    defense: TransferFreeze,
    settings: TrainSettings,
    box: tuple[float, float],
    gen: torch.Generator,
    seed: int,
) -> None:
    if spec.kind != "mlp":
        raise ConfigError.invalid("architecture.kind", "'mlp' for the TL defense", spec.kind)
    n_layers = len(spec.kwargs["hidden"]) + 1
    if defense.frozen >= n_layers:
        raise ConfigError.invalid("frozen", f"fewer than the {n_layers} layers", defense.frozen)
    px, py = public
    pre_spec = model_spec("mlp", **{**spec.kwargs, "out_dim": int(py.max()) + 1})
    pre = build_model(pre_spec, seed=seed + 1)
    pre_settings = TrainSettings(
        steps=defense.pretrain_steps,
        lr=settings.lr,
        batch_size=settings.batch_size,
        flip=settings.flip,
    )
    _loop(pre, px, py, Standard(), pre_settings, box, gen)
    state = {
        k: v for k, v in pre.state_dict().items() if not k.startswith(f"layers.{n_layers - 1}.")
    }
    model.load_state_dict(state, strict=False)
    layers = getattr(model, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ConfigError.invalid("architecture", "an MLP with a layer list", type(model))
    for i in range(defense.frozen):
        for p in layers[i].parameters():
            p.requires_grad_(False)


def train_classifier(
    x: torch.Tensor,
    y: torch.Tensor,
    classes: tuple[str, ...],
    spec: ModelSpec,
    *,
    defense: Defense | None = None,
    settings: TrainSettings | None = None,
    value_range: tuple[float, float] = (0.0, 1.0),
    seed: int = 0,
    public: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> TrainedClassifier:
    """Train ``spec`` on ``(x, y)`` with ``defense`` and publish it.

    Args:
        x, y: the private training set (labels ``0 .. len(classes) - 1``).
        classes: the class names, in label order.
        spec: the architecture (its output size must be ``len(classes)``).
        defense: the training-time defense (default: none).
        settings: optimiser settings.
        value_range: the input box (PGD clamps to it).
        seed: seed of the initialisation and the batch draws.
        public: public data ``(x, y)`` of other classes (needed by :class:`TransferFreeze`).

    Raises:
        ConfigError: TL without public data or with a non-MLP architecture.
    """
    defense = defense if defense is not None else Standard()
    settings = settings if settings is not None else TrainSettings()
    gen = torch.Generator().manual_seed(seed)
    model = build_model(spec, seed=seed)
    if isinstance(defense, TransferFreeze):
        if public is None:
            raise ConfigError("the TL defense pre-trains on public data: pass public=(x, y)")
        _transfer(spec, model, public, defense, settings, value_range, gen, seed)
    _loop(model, x, y, defense, settings, value_range, gen)
    for p in model.parameters():
        p.requires_grad_(True)
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    release = ClassifierRelease(spec, state, tuple(classes), tuple(x.shape[1:]), value_range)  # type: ignore[arg-type]
    return TrainedClassifier(release, accuracy(model, x, y))
