"""``trainleak bound ...``: compute lower bounds from the command line (mounted by the CLI)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from trainleak.bounds.dpsgd import REPRESENTATIONS, Schedule, dpsgd_distortion_bound
from trainleak.data import load_dataset
from trainleak.errors import ConfigError, TrainleakError
from trainleak.metrics.features import train_feature_net

bound_app = typer.Typer(help="Lower bounds on reconstruction error, computed before training.")


@bound_app.callback()
def _group() -> None:
    """Lower bounds on reconstruction error (keeps ``dpsgd`` a sub-command)."""


@bound_app.command("dpsgd")
def dpsgd(
    sampling_rate: Annotated[float, typer.Option("--sampling-rate", help="Poisson rate q")],
    noise_multiplier: Annotated[float, typer.Option("--noise-multiplier", help="sigma")],
    steps: Annotated[int, typer.Option("--steps", help="number of steps T")],
    dataset: Annotated[str, typer.Option("--dataset", help="digits, mnist, ...")] = "digits",
    delta: Annotated[float, typer.Option("--delta", help="delta for epsilon")] = 1e-5,
    representation: Annotated[str, typer.Option("--representation")] = "pixel",
    samples: Annotated[int, typer.Option("--samples", help="data sample size")] = 1000,
    confidence: Annotated[float, typer.Option("--confidence")] = 0.05,
    patch: Annotated[int, typer.Option("--patch", help="pixel block side")] = 2,
    data_dir: Annotated[str | None, typer.Option("--data-dir")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The DP-SGD rate-distortion lower bound for (q, sigma, T) and a data sample."""
    try:
        out = compute_dpsgd_bound(
            sampling_rate, noise_multiplier, steps, dataset, delta, representation,
            samples, confidence, patch, data_dir,
        )  # fmt: skip
    except TrainleakError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(out, indent=2, default=float))
        return
    for key, value in out.items():
        typer.echo(f"{key:28s} {value}")


def compute_dpsgd_bound(
    sampling_rate: float,
    noise_multiplier: float,
    steps: int,
    dataset: str,
    delta: float,
    representation: str,
    samples: int,
    confidence: float,
    patch: int,
    data_dir: str | None,
) -> dict[str, Any]:
    """Library function behind ``trainleak bound dpsgd`` (validated inputs, JSON-ready output)."""
    import torch

    if representation not in REPRESENTATIONS:
        raise ConfigError.invalid(
            "representation", f"one of {list(REPRESENTATIONS)}", representation
        )
    schedule = Schedule.constant(sampling_rate, noise_multiplier, steps)
    ds = (
        load_dataset(dataset, data_dir)
        if dataset == "digits"
        else load_dataset(dataset, data_dir, limit=samples)
    )
    g = torch.Generator().manual_seed(0)
    x = ds.x[torch.randperm(len(ds), generator=g)[:samples]]
    fmap = None
    if representation == "features":
        fmap = train_feature_net(ds.subset(list(range(min(len(ds), 500)))))
    res = dpsgd_distortion_bound(
        schedule, x, representation=representation, feature_map=fmap, patch=patch,
        confidence=confidence, delta=delta,
    )  # fmt: skip
    return {
        "bound": res.value,
        "unit": res.unit,
        **dict(res.components),
        "assumptions": res.assumptions,
    }
