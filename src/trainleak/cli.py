"""The ``trainleak`` command line: a thin front over :mod:`trainleak.audit`.

Commands: ``list``, ``run``, ``demo``, ``report`` and ``audit``. Results go to stdout, progress
bars and errors to stderr. An error trainleak raises on purpose (bad config value, unknown
experiment, missing file) prints one red ``error: <message>`` line and exits with code 2.
"""

from __future__ import annotations

import enum
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trainleak.attacks import available_attacks
from trainleak.audit import (
    RESULT_FILE,
    STORE_FILE,
    RunInterrupted,
    record_run,
    run_grid,
    write_report,
)
from trainleak.cli_assess import progress_bars as _progress_bars
from trainleak.cli_assess import register as register_assess
from trainleak.cli_bound import bound_app
from trainleak.errors import ConfigError, DataNotFoundError, TrainleakError
from trainleak.experiments import available_experiments
from trainleak.experiments.base import Experiment, Result

app = typer.Typer(
    help="Measure what can be reconstructed from a training release, and what provably cannot.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(bound_app, name="bound")
register_assess(app)  # attacks, attack, assess: audit your own release

DEMO_EXPERIMENT = "kkt-reconstruction"
RUNS_DIR = Path("runs")
_EXP_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


class BackendChoice(enum.StrEnum):
    """Where ``audit`` runs the grid points."""

    local = "local"
    ray = "ray"


def _out() -> Console:
    return Console(highlight=False)


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


@contextmanager
def _errors() -> Iterator[None]:
    """Turn a :class:`TrainleakError` into one red line on stderr and exit code 2."""
    try:
        yield
    except TrainleakError as exc:
        _err().print(f"[bold red]error:[/] [red]{escape(str(exc))}[/]")
        raise typer.Exit(code=2) from None
    except (RunInterrupted, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, RunInterrupted) else signal.SIGINT
        what = exc if isinstance(exc, RunInterrupted) else "interrupted by SIGINT (Ctrl-C)"
        text = escape(f"{what}; the run(s) are marked interrupted")
        _err().print(f"[bold red]stopped:[/] [red]{text}[/]")
        raise typer.Exit(code=128 + int(signum)) from None


def parse_overrides(pairs: list[str] | None) -> dict[str, Any]:
    """Parse ``key=value`` strings; values are YAML (``1e-3``, ``true``, ``[1, 2]``, ``null``).

    Raises:
        ConfigError: for an item without ``=``, an empty key or a value that is not YAML.
    """
    overrides: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError.invalid("--set", "key=value", pair)
        try:
            value = yaml.safe_load(raw)
        except (yaml.YAMLError, ValueError, RecursionError):  # ValueError: e.g. a bad date
            raise ConfigError.invalid(
                key, "a YAML value (number, true/false, list, text)", raw
            ) from None
        # YAML 1.1 reads 1e-3 (no dot) as text; a number is what a user means by it
        overrides[key] = (
            float(value) if isinstance(value, str) and _EXP_NUMBER.match(value) else value
        )
    return overrides


@app.command("list")
def list_() -> None:
    """List the experiments and attacks with their one-line summaries."""
    with _errors():
        console = _out()
        for title, items in (
            ("Experiments", {n: _summary(e) for n, e in available_experiments().items()}),
            ("Attacks", {n: a.summary for n, a in available_attacks().items()}),
        ):
            table = Table(title=title, title_justify="left")
            table.add_column("name", style="bold", no_wrap=True)
            table.add_column("summary")
            for name in sorted(items):
                table.add_row(name, items[name] if title == "Experiments" else escape(items[name]))
            console.print(table)


def _summary(exp: Experiment) -> str:
    missing = exp.missing_extras()
    if not missing:
        return escape(exp.summary)
    line = f"pip install 'trainleak[{','.join(missing)}]'"
    return f"{escape(exp.summary)} [yellow](needs an extra: {escape(line)})[/]"


@app.command()
def run(
    name: Annotated[str, typer.Argument(help="Experiment name (see `trainleak list`).")],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", "-s", help="Config value key=value (YAML value); repeatable."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Result folder [runs/NAME-TIME]; if taken, OUT-2, OUT-3, ..."
        ),
    ] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print only the result JSON on stdout.")
    ] = False,
    store: Annotated[
        Path | None, typer.Option("--store", help="SQLite store [OUT/../trainleak.sqlite].")
    ] = None,
) -> None:
    """Run one experiment and print its metrics and claims."""
    with _errors():
        overrides = parse_overrides(set_)
        out_dir = out if out is not None else RUNS_DIR / f"{name}-{_stamp()}"
        with _progress_bars() as progress:
            done = record_run(name, overrides, out_dir, store_path=store, progress=progress)
        if done.out_dir.resolve() != out_dir.resolve():
            _err().print(
                f"{escape(str(out_dir))} holds an earlier run; this run (id {done.run_id}) "
                f"is in {escape(str(done.out_dir))}",
                soft_wrap=True,
            )
        if json_:
            sys.stdout.write((done.out_dir / RESULT_FILE).read_text(encoding="utf-8") + "\n")
        else:
            _print_result(done.result, done.out_dir)


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the run and report.")] = (
        RUNS_DIR / "demo"
    ),
) -> None:
    """Run the KKT reconstruction demo (digits, a few minutes) and write its HTML report."""
    with _errors():
        run_dir = out / DEMO_EXPERIMENT
        with _progress_bars() as progress:
            done = record_run(DEMO_EXPERIMENT, {}, run_dir, progress=progress)
        _print_result(done.result, done.out_dir)
        path = write_report([done.out_dir], out / "report.html")
        _out().print(f"report: {escape(str(path))}", soft_wrap=True)


@app.command()
def report(
    sources: Annotated[
        list[Path] | None,
        typer.Argument(help="Result folders or SQLite stores [runs/trainleak.sqlite]."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write.")] = Path(
        "report.html"
    ),
) -> None:
    """Render runs (result folders or a store) as one self-contained HTML page.

    A store is opened read-only; a file that is not a trainleak store is refused.
    """
    with _errors():
        if not sources:
            default = RUNS_DIR / STORE_FILE
            if not default.is_file():
                raise DataNotFoundError(
                    f"no sources given and no store at {str(default)!r}; pass result folders "
                    f"or a store, or run `trainleak run NAME` first"
                )
            sources = [default]
        path = write_report(sources, out)
        _out().print(f"report: {escape(str(path))}", soft_wrap=True)


@app.command()
def audit(
    grid: Annotated[Path, typer.Argument(help="Grid YAML: experiment, grid, set.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output root (runs and store).")] = (
        RUNS_DIR / "audit"
    ),
    workers: Annotated[
        int | None,
        typer.Option(
            help="Parallel local worker processes [1]; with --backend ray, the most tasks in "
            "flight [the cluster's CPUs]."
        ),
    ] = None,
    backend: Annotated[BackendChoice, typer.Option(help="Where to run.")] = BackendChoice.local,
    ray_address: Annotated[
        str | None,
        typer.Option(help="Ray cluster address (e.g. ray://head:10001) [$RAY_ADDRESS or local]."),
    ] = None,
) -> None:
    """Run every point of a grid not already done in OUT/trainleak.sqlite.

    Two audits may share OUT: each point is claimed in the store before it runs, so none runs
    twice. SIGTERM or Ctrl-C stops the workers and marks their runs interrupted; run the same
    command again to finish the grid.
    """
    with _errors():
        with _progress_bars() as progress:
            outcomes = run_grid(
                grid,
                out,
                workers,
                backend=backend.value,
                progress=progress,
                ray_address=ray_address,
            )
        table = Table(title=f"audit {grid}", title_justify="left")
        for column in ("experiment", "folder", "status", "error"):
            table.add_column(column)
        styles = {"done": "green", "skipped": "dim", "busy": "yellow", "failed": "red"}
        for o in outcomes:
            last = (o.error or "").strip().splitlines()[-1:] or [""]
            style = styles.get(o.status, "red")
            folder = (o.out_dir or o.job.out_dir).name
            table.add_row(o.job.experiment, folder, f"[{style}]{o.status}[/]", escape(last[0]))
        _out().print(table)
    if any(o.status in ("failed", "interrupted") for o in outcomes):
        raise typer.Exit(code=1)


def _stamp() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S")


def _print_result(result: Result, out_dir: Path) -> None:
    console = _out()
    table = Table(title=f"{result.experiment}: metrics", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in result.metrics.items():
        table.add_row(escape(str(key)), escape(_fmt(value)))
    console.print(table)
    for claim in result.claims:
        mark = "[green]✔ holds[/]" if claim.holds else "[red]✘ does not hold[/]"
        evidence = ", ".join(f"{k} = {_fmt(v)}" for k, v in claim.evidence.items())
        console.print(f"{mark}  {escape(claim.text)}", soft_wrap=True)
        if evidence:
            console.print(f"    [dim]{escape(evidence)}[/]", soft_wrap=True)
    console.print(f"results: {escape(str(out_dir))}", soft_wrap=True)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
