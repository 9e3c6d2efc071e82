"""``trainleak attacks``, ``trainleak attack`` and ``trainleak assess``: audit your own release.

A release is a spec file (or its folder) naming its tensor files (see
:mod:`trainleak.releases.io`); the adversary's knowledge is a YAML/JSON file (see
:mod:`trainleak.releases.knowledge_file`); ``--private`` names the reference set used only to
score reconstructions. Every file is read and checked before any attack runs; a bad file is one
red ``error:`` line naming the file and the field, and exit code 2.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import rich.progress as rp
import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trainleak.audit.assess import (
    Assessment,
    as_knowledge,
    complete_knowledge,
    matching_attacks,
    missing_knowledge,
)
from trainleak.audit.assess_output import run_assessment
from trainleak.audit.prior_file import prior_from_file
from trainleak.errors import ConfigError, TrainleakError
from trainleak.experiments.risk import LEVELS
from trainleak.progress import Progress
from trainleak.releases.io import load_release
from trainleak.systems.classifier import PriorSettings

_EXP_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")
_STYLE = dict(zip(LEVELS, ("bold red", "bold yellow", "bold green", "bold", "dim"), strict=True))

ReleaseOpt = Annotated[
    Path, typer.Option("--release", "-r", help="Release spec (release.json) or its folder.")
]
KnowledgeOpt = Annotated[
    Path | None, typer.Option("--knowledge", "-k", help="Adversary's knowledge (YAML/JSON).")
]
PrivateOpt = Annotated[
    Path | None,
    typer.Option("--private", help="Reference set (safetensors: x, y) to score against; never "
                 "shown to an attack."),
]  # fmt: skip
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Folder for result.json and report.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the attacks' generators.")]


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except TrainleakError as exc:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        err.print(f"[bold red]error:[/] [red]{escape(str(exc))}[/]")
        raise typer.Exit(code=2) from None


@contextmanager
def progress_bars() -> Iterator[Progress]:
    """Rich progress bars on stderr, driven by trainleak's ``progress(task, done, total)``.

    The display starts at the first report, so a run that fails early prints nothing extra.
    """
    bars = rp.Progress(
        rp.TextColumn("{task.description}"),
        rp.BarColumn(),
        rp.MofNCompleteColumn(),
        rp.TimeElapsedColumn(),
        console=Console(stderr=True, highlight=False, soft_wrap=True),
    )
    ids: dict[str, rp.TaskID] = {}

    def callback(task: str, done: int, total: int) -> None:
        if not ids:
            bars.start()
        if task not in ids:
            ids[task] = bars.add_task(task, total=total)
        bars.update(ids[task], completed=done, total=total)

    try:
        yield callback
    finally:
        if ids:
            bars.stop()


def parse_sets(pairs: list[str] | None, attack: str | None) -> dict[str, dict[str, Any]]:
    """``--set`` values as settings per attack: ``key=value`` for one attack (``attack``), or
    ``attack.key=value`` (values are YAML: ``1e-3``, ``true``, ``[1, 2]``)."""
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        name, dot, field = key.partition(".") if attack is None else (attack, ".", key)
        if not sep or not dot or not name or not field:
            expected = "key=value" if attack else "ATTACK.key=value (e.g. kkt.steps=500)"
            raise ConfigError.invalid("--set", expected, pair)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError.invalid(key, "a YAML value", raw) from None
        if isinstance(value, str) and _EXP_NUMBER.match(value):
            value = float(value)
        out.setdefault(name, {})[field] = value
    return out


def attacks_cmd(release: ReleaseOpt, knowledge: KnowledgeOpt = None) -> None:
    """List the attacks that apply to a release's type and the knowledge each needs."""
    with _errors():
        loaded = load_release(release)
        know = complete_knowledge(loaded, as_knowledge(knowledge))
        console = Console(highlight=False, soft_wrap=True)
        console.print(f"attacks on {escape(loaded.release.describe())}:")
        for name, cls in matching_attacks(loaded.release).items():
            missing = missing_knowledge(cls, know)
            status = (
                "[green]knowledge complete[/]"
                if not missing
                else f"[yellow]missing {escape(str(missing))}[/]"
            )
            needs = ", ".join(sorted(cls.requires)) or "nothing"
            console.print(f"  [bold]{name}[/]  needs: {needs}  ({status})")
            console.print(f"      [dim]{escape(cls.summary)}[/]")


def attack_cmd(
    name: Annotated[str, typer.Argument(help="Attack (see `trainleak attacks --release`).")],
    release: ReleaseOpt,
    out: OutOpt,
    knowledge: KnowledgeOpt = None,
    private: PrivateOpt = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="Attack setting key=value.")
    ] = None,
    seed: SeedOpt = 0,
) -> None:
    """Run one attack on a saved release and write its report with the risk card."""
    with _errors():
        settings = parse_sets(set_, name)
        with progress_bars() as progress:
            assessment, report = run_assessment(
                release, knowledge, out, private=private, attacks=[name], settings=settings,
                seed=seed, progress=progress,
            )  # fmt: skip
        _print(assessment, report)


def assess_cmd(
    release: ReleaseOpt,
    out: OutOpt,
    knowledge: KnowledgeOpt = None,
    private: PrivateOpt = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", "-s", help="Attack setting ATTACK.key=value; repeatable."),
    ] = None,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only this attack; repeatable.")
    ] = None,
    seed: SeedOpt = 0,
) -> None:
    """Run every applicable attack and bound on a saved release; write the risk card and report."""
    with _errors():
        settings = parse_sets(set_, None)
        with progress_bars() as progress:
            assessment, report = run_assessment(
                release, knowledge, out, private=private, attacks=only, settings=settings,
                seed=seed, progress=progress,
            )  # fmt: skip
        _print(assessment, report)


def prior_cmd(
    public: Annotated[
        Path, typer.Option("--public", help="Public images of other classes (safetensors).")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to save the prior to.")],
    tensor: Annotated[str, typer.Option("--tensor", help="Name of the images tensor.")] = "x",
    low: Annotated[float, typer.Option("--low", help="Lower end of the value range.")] = 0.0,
    high: Annotated[float, typer.Option("--high", help="Upper end of the value range.")] = 1.0,
    steps: Annotated[int, typer.Option("--steps", help="Adam steps of the VAE or GAN.")] = 3000,
    latent_dim: Annotated[int, typer.Option("--latent-dim", help="Latent size.")] = 16,
    kind: Annotated[
        str, typer.Option("--kind", help="'vae' (default) or 'gan' (a convolutional generator).")
    ] = "vae",
    channels: Annotated[
        int | None,
        typer.Option(
            "--channels",
            help="Feature maps of the convolutional decoder (VAE: 0, an MLP decoder, by "
            "default; GAN: 64 by default).",
        ),
    ] = None,
    classes: Annotated[
        list[str] | None,
        typer.Option("--class", help="Name of a public class (for the record); repeatable."),
    ] = None,
    seed: SeedOpt = 0,
) -> None:
    """Train the adversary's generative prior (a VAE, or a GAN) on public images and save it: the
    folder a knowledge file names as ``generative_prior`` for model inversion of a classifier."""
    with _errors():
        maps = channels if channels is not None else (64 if kind == "gan" else 0)
        settings = PriorSettings(latent_dim=latent_dim, steps=steps, kind=kind, channels=maps)
        with progress_bars() as progress:
            prior = prior_from_file(
                public,
                tensor=tensor,
                value_range=(low, high),
                settings=settings,
                public_classes=tuple(classes or ()),
                seed=seed,
                progress=progress,
            )
        folder = prior.save(out)
        Console(highlight=False, soft_wrap=True).print(
            f"prior: {escape(str(folder))} (latent {prior.latent_dim}, images "
            f"{tuple(prior.input_shape)} in {prior.value_range})"
        )


def _print(a: Assessment, report: Path) -> None:
    console = Console(highlight=False, soft_wrap=True)
    table = Table(title="attacks", title_justify="left")
    for column in ("attack", "status", "recovered", "certainty / reason"):
        table.add_column(column, overflow="fold")
    for r in a.runs:
        f = r.scored.finding if r.scored is not None else None
        rec = "-" if f is None or f.recovered is None else f"{f.recovered} / {f.of or '?'}"
        table.add_row(r.name, r.status, rec, escape(f.certainty if f else r.reason))
    console.print(table)
    card = a.card
    style = _STYLE.get(card.level, "bold")
    console.print(f"[{style}]{card.level.upper()}[/]: {escape(card.verdict)}")
    console.print(f"report: {escape(str(report))}")


def register(app: typer.Typer) -> None:
    """Mount the four commands on the root ``trainleak`` app."""
    app.command("attacks")(attacks_cmd)
    app.command("attack")(attack_cmd)
    app.command("assess")(assess_cmd)
    app.command("prior")(prior_cmd)
