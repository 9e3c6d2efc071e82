"""Attacker-side development task for the ORL model-inversion settings (issue 12).

Settings of the attacks are chosen here, never on the private identities: identities
``s21``-``s30`` (public) stand in for the private classes (images 1-8 train a dev target of
each defense and a dev ConvNet evaluator, 9-10 test), ``s31``-``s40`` train the dev prior
(the MLP VAE of the experiments' defaults). Nothing of ``s1``-``s20`` is loaded into any model
here. Prints Acc@1 under the dev evaluator (10 classes, chance 0.1) for each attack variant
on each dev target, at equal candidate budget for the prior-only baseline.

Run from the repository root (cached by content hash like the experiments):
``TRAINLEAK_DATA=../shared/data OMP_NUM_THREADS=1 python benchmarks/model_inversion_dev.py --targets
standard negls --variants standard adaptive`` (variants: ``standard``, ``adaptive``, ``prior_only``,
more by ``--extra``; ``--target-flip`` trains the dev targets on mirror images as the ORL
experiments do, ``--prior-flip``, ``--prior-steps``, ``--latent-dim``, ``--prior-kind`` and
``--prior-channels`` change the dev prior).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from trainleak.attacks.inversion import AdaptiveInversion, GenerativeInversion, PriorOnly
from trainleak.metrics.face_identity import DlibEmbedder, identity_score
from trainleak.metrics.inversion import attack_accuracy
from trainleak.scenarios.inversion import (
    BOX,
    InversionTask,
    adversary_knowledge,
    default_cache_dir,
    orl_task,
)
from trainleak.scenarios.inversion_targets import (
    recipe,
    task_prior,
    train_evaluators,
    train_target,
)
from trainleak.systems.classifier import PriorSettings, train_prior

COMMON: dict[str, Any] = {"candidates": 200, "keep": 16, "final": 8, "flip": True}
ADA: dict[str, Any] = {**COMMON, "steps": 200, "restarts": 2, "model_augment": 1}
VARIANTS: dict[str, tuple[type, dict[str, Any]]] = {
    "standard": (GenerativeInversion, {**COMMON, "steps": 100}),
    "adaptive": (AdaptiveInversion, ADA),
    "prior_only": (PriorOnly, {"candidates": 400, "final": 8, "flip": True}),
}


def dev_task(fold: int = 0, size: int = 32) -> InversionTask:
    """Fold 0: s21-s30 as the dev private classes (images 1-8 train, 9-10 test), s31-s40 as
    the dev public split; fold 1 swaps the halves. Built from the public identities of
    :func:`orl_task` only."""
    full = orl_task(size)
    x, y = full.public
    y = (y + 10 * fold) % 20
    names = full.public_classes[10:] + full.public_classes[:10]
    names = names if fold else full.public_classes
    idx = torch.arange(len(x)) % 10
    priv, pub = y < 10, y >= 10
    tr, te = priv & (idx < 8), priv & (idx >= 8)
    return InversionTask(
        "orl-dev",
        (x[tr].contiguous(), y[tr].clone()),
        (x[te].contiguous(), y[te].clone()),
        (x[pub].contiguous(), y[pub] - 10),
        names[:10],
        names[10:],
    )


def _spread(x: torch.Tensor, y: torch.Tensor | None) -> float:
    """Mean over classes of the mean pairwise RMS pixel distance between the class's
    reconstructions (0: copies of one image); attacker-side, no private data."""
    if y is None:
        return float("nan")
    per = []
    for c in torch.unique(y):
        flat = x[y == c].flatten(1)
        if len(flat) > 1:
            per.append(float(torch.pdist(flat).mean()) / flat.shape[1] ** 0.5)
    return sum(per) / max(len(per), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--targets", nargs="+", default=["standard", "negls"])
    parser.add_argument("--variants", nargs="+", default=["standard", "adaptive"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dlib", action="store_true", help="dlib identity accuracy too")
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--target-flip", action="store_true", help="targets train on mirrors")
    parser.add_argument("--prior-flip", action="store_true", help="the prior trains on mirrors")
    parser.add_argument("--prior-steps", type=int, default=2000)
    parser.add_argument("--latent-dim", type=int, default=16)
    parser.add_argument("--prior-kind", default="vae", choices=["vae", "gan"])
    parser.add_argument("--prior-channels", type=int, default=0)
    parser.add_argument("--d-channels", type=int, default=32, help="the GAN critic's maps")
    parser.add_argument(
        "--prior-device",
        default="",
        help="train the prior on this device (e.g. cuda), uncached; attacks stay on the CPU",
    )
    parser.add_argument(
        "--extra",
        default="{}",
        help='JSON of extra variants: {"name": ["adaptive", {field: value}]}',
    )
    args = parser.parse_args()
    for name, (base, over) in json.loads(args.extra).items():
        cls, kw = VARIANTS[base]
        VARIANTS[name] = (cls, {**kw, **over})
    for fold in args.folds:
        _fold(fold, args)


def _fold(fold: int, args: argparse.Namespace) -> None:
    task, cache = dev_task(fold), default_cache_dir()
    settings = PriorSettings(
        latent_dim=args.latent_dim,
        steps=args.prior_steps,
        flip=args.prior_flip,
        kind=args.prior_kind,
        channels=args.prior_channels,
        d_channels=args.d_channels,
    )
    if args.prior_device:
        prior = train_prior(
            task.public[0].to(args.prior_device),
            settings,
            value_range=BOX,
            public_classes=task.public_classes,
            seed=args.seed,
        )
    else:
        prior = task_prior(task, settings, args.seed, cache)
    ev = train_evaluators(task, 400, args.seed, cache)["standard"].model()
    know = adversary_knowledge(task, prior)
    dlib = DlibEmbedder(BOX) if args.dlib else None
    ref = dlib(task.private[0]) if dlib is not None else None
    for t in args.targets:
        name, _, warm = t.partition("@")  # "negls@0.5": Neg-LS with that warm-up
        rec_ = recipe(
            name,
            task,
            600,
            atat_eps=0.02,
            atat_weight=1.0,
            negls_warmup=float(warm or 0),
            flip=args.target_flip,
        )
        target = train_target(task, rec_, args.seed, cache)
        for v in args.variants:
            cls, kw = VARIANTS[v]
            start = time.perf_counter()
            rec = cls(**kw)(target.release, know, seed=args.seed + 1)
            acc = attack_accuracy(ev, rec.inputs, rec.labels, task.num_classes, seed=0)
            ident = f" spread {_spread(rec.inputs, rec.labels):.3f}"
            if dlib is not None and ref is not None and rec.labels is not None:
                got = identity_score(dlib, rec.inputs, rec.labels, ref, task.private[1], 10)
                ident += f" dlib {got.accuracy:.3f}"
            print(
                f"fold {fold} {t:10s} clean {target.clean_accuracy:.3f} {v:24s} "
                f"acc1 {acc.acc1:.3f} [{acc.acc1_interval[0]:.3f}, {acc.acc1_interval[1]:.3f}]"
                f"{ident} {time.perf_counter() - start:.0f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
