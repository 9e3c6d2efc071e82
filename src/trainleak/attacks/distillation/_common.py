"""Shared pieces of the information revelation attack: knowledge checks, the adversary's
training of a network on a released set (surrogates), and a content hash for its caches."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.fitting import fit
from trainleak.models.registry import build_model
from trainleak.models.spec import ModelSpec
from trainleak.releases.distilled import DistilledSet, ShadowBank, check_architecture
from trainleak.releases.knowledge import Knowledge


def tensor_hash(*tensors: torch.Tensor, extra: str = "") -> str:
    """SHA-256 of the tensors' shapes, dtypes and bytes, plus ``extra``."""
    h = hashlib.sha256(extra.encode())
    for t in tensors:
        h.update(str((tuple(t.shape), t.dtype)).encode())
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def architectures(knowledge: Knowledge, release: DistilledSet) -> dict[str, ModelSpec]:
    """The candidate architectures by kind, each checked to take the release's images.

    Raises:
        ConfigError: a candidate that cannot take the images, or two candidates of one kind.
    """
    specs = knowledge.candidate_architectures or ()
    out: dict[str, ModelSpec] = {}
    for spec in specs:
        check_architecture(spec, release)
        if spec.kind in out:
            raise ConfigError.invalid(
                "candidate_architectures", "one candidate per architecture kind", spec.kind
            )
        out[spec.kind] = spec
    return out


def checked_bank(knowledge: Knowledge, release: DistilledSet) -> ShadowBank:
    """The shadow bank, checked against the release and the candidate lists.

    Raises:
        ConfigError: no bank, a bank of another task, or a bank labelled with an algorithm or
            architecture outside the candidates.
    """
    bank = knowledge.shadow_bank
    if bank is None:
        raise ConfigError.invalid("shadow_bank", "a ShadowBank", None)
    bank.check_release(release)
    algos = set(knowledge.candidate_algorithms or ())
    kinds = {s.kind for s in knowledge.candidate_architectures or ()}
    extra_a = sorted(set(bank.algorithms) - algos)
    extra_f = sorted(set(bank.architectures) - kinds)
    if extra_a or extra_f:
        raise ConfigError.invalid(
            "shadow_bank",
            f"sets labelled with candidate algorithms {sorted(algos)} and architectures "
            f"{sorted(kinds)}",
            f"other labels {extra_a + extra_f}",
        )
    return bank


def auxiliary(knowledge: Knowledge, release: DistilledSet) -> tuple[torch.Tensor, torch.Tensor]:
    """The labelled auxiliary data, checked against the release's image shape."""
    if knowledge.auxiliary is None:
        raise ConfigError.invalid("auxiliary", "labelled auxiliary data (x, y)", None)
    x, y = knowledge.auxiliary
    if tuple(x.shape[1:]) != release.input_shape or y.shape != (x.shape[0],) or len(x) == 0:
        raise ConfigError.invalid(
            "auxiliary",
            f"(x, y) with x (n, {', '.join(map(str, release.input_shape))}) and y (n,), n > 0",
            (tuple(x.shape), tuple(y.shape)),
        )
    return x.float(), y


def train_surrogate(
    release: DistilledSet, spec: ModelSpec, *, steps: int, lr: float, seed: int
) -> nn.Module:
    """A fresh ``spec`` network trained on the release (the usual distillation protocol: SGD
    with momentum, the published learning rate when there is one)."""
    net = build_model(spec, seed=seed)
    fit(
        net,
        release.images.float(),
        release.labels,
        steps=steps,
        lr=release.lr if release.lr is not None else lr,
        generator=torch.Generator().manual_seed(seed),
        batch_size=256,
    )
    net.eval()
    return net


def spec_key(specs: Sequence[ModelSpec]) -> str:
    """A stable text key of architecture specs (for cache keys)."""
    return repr(sorted((s.kind, sorted(s.kwargs.items())) for s in specs))
