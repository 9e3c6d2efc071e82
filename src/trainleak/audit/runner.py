"""Run one experiment: validate, record in the store, run, write its files.

:func:`run_experiment` is what the CLI's ``run`` command and the grid workers call. It writes
into ``out_dir``:

- ``result.json``: experiment, config, metrics, claims (text, holds, evidence), tables, notes,
  artifacts, wall and CPU seconds, and the run's id in the store (see
  :mod:`trainleak.audit.serialize` for the JSON rules);
- ``.trainleak-run``: the marker that makes the folder this run's own (:func:`claim_folder`);
- ``images/<name>.png`` for every ``result.images`` entry (Pillow);
- ``figures/<name>.png`` for every ``result.figures`` entry (matplotlib's ``savefig``; no
  backend is switched globally).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from trainleak.audit._owner import Heartbeat
from trainleak.audit._signals import RunInterrupted, interrupt_reason, signals_raise
from trainleak.audit.serialize import dumps, to_jsonable
from trainleak.audit.store import ResultStore
from trainleak.errors import ShapeError
from trainleak.experiments import get_experiment
from trainleak.experiments.base import Result
from trainleak.parallel import cpu_times
from trainleak.progress import Progress

RESULT_FILE = "result.json"
STORE_FILE = "trainleak.sqlite"
MARKER_FILE = ".trainleak-run"


def default_store_path(out_dir: str | Path) -> Path:
    """The store used when none is given: ``<out_dir>/../trainleak.sqlite``."""
    return Path(out_dir).resolve().parent / STORE_FILE


@dataclass(frozen=True)
class RecordedRun:
    """A finished run: its id in the store, its own folder and its result."""

    run_id: int
    out_dir: Path
    result: Result


def claim_folder(base: str | Path, run_id: int) -> Path:
    """Take a fresh folder for run ``run_id``: ``base`` if free, else ``base-2``, ``base-3``...

    A folder is taken by creating its marker file (``.trainleak-run``, holding the run id)
    atomically (a hard link, or ``O_EXCL``), which only one process can do; a folder holding a
    ``result.json`` of an earlier trainleak is taken too. So a second run never writes into the
    folder of a first, even when both start at once with the same ``--out``.
    """
    base = Path(base)
    text = json.dumps({"run_id": run_id}) + "\n"
    for k in range(1, 100_000):
        folder = base if k == 1 else base.with_name(f"{base.name}-{k}")
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / RESULT_FILE).exists() and _take(folder / MARKER_FILE, text):
            return folder
    raise RuntimeError(f"no free run folder next to {base}")  # pragma: no cover


def _take(marker: Path, text: str) -> bool:
    """Create ``marker`` holding ``text`` unless it exists, atomically: the text is written to
    a private file first and hard-linked into place (never an empty marker, even if the process
    is killed); without hard links, an exclusive create."""
    tmp = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    try:
        os.link(tmp, marker)
        return True
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def execute(
    name: str,
    overrides: Mapping[str, Any] | None,
    out_dir: Path,
    run_id: int | None = None,
    progress: Progress | None = None,
) -> tuple[Result, dict[str, Any]]:
    """Run the experiment and write its files into ``out_dir``; no store is touched.

    Returns:
        The result and the ``result.json`` document (which records ``run_id``).
    """
    exp = get_experiment(name)
    exp.check_extras()
    config = exp.make_config(overrides)
    config_dict = config.model_dump(mode="json")
    start, (cpu, cpu_kids) = time.perf_counter(), cpu_times()
    result = exp.run(config, progress)
    result.artifacts.update(write_artifacts(result, out_dir))
    result.artifacts["result"] = RESULT_FILE
    doc = result_document(result, config_dict, time.perf_counter() - start)
    own, kids = cpu_times()
    # this process (all threads) plus the worker processes it waited for (``workers``)
    doc["cpu_seconds"] = (own - cpu) + (kids - cpu_kids)
    doc["cpu_seconds_self"] = own - cpu
    doc["run_id"] = run_id
    tmp = out_dir / f".{RESULT_FILE}.tmp"
    tmp.write_text(dumps(doc, indent=2))
    os.replace(tmp, out_dir / RESULT_FILE)  # a reader never sees half a file
    return result, doc


def run_experiment(
    name: str,
    overrides: Mapping[str, Any] | None,
    out_dir: str | Path,
    *,
    store_path: str | Path | None = None,
    progress: Progress | None = None,
) -> Result:
    """Run experiment ``name`` with config ``overrides`` and record it.

    The same as :func:`record_run`, returning only the result.
    """
    return record_run(name, overrides, out_dir, store_path=store_path, progress=progress).result


def record_run(
    name: str,
    overrides: Mapping[str, Any] | None,
    out_dir: str | Path,
    *,
    store_path: str | Path | None = None,
    progress: Progress | None = None,
) -> RecordedRun:
    """Run experiment ``name`` with config ``overrides``, in its own folder, and record it.

    Args:
        name: a registered experiment.
        overrides: config values; everything else keeps the experiment's defaults.
        out_dir: the run's folder; when it already holds a run, the run goes to
            ``out_dir-2`` (``-3``, ...) instead (see :func:`claim_folder`).
        store_path: the SQLite store; default :func:`default_store_path`.
        progress: callback ``progress(task, done, total)`` handed to the experiment.

    Returns:
        The run's id, its folder and the experiment's :class:`~trainleak.experiments.Result`,
        with ``artifacts`` filled in (paths relative to the folder).

    Raises:
        ConfigError: for an unknown experiment or invalid overrides (nothing is recorded).
        MissingExtraError: the experiment needs an extra that is not installed (nothing is
            recorded).
        RunInterrupted: SIGTERM or SIGHUP arrived; the row is marked ``interrupted``
            (``KeyboardInterrupt`` likewise).
        Exception: whatever the experiment raises, after its row is marked ``failed`` with the
            traceback.
    """
    exp = get_experiment(name)
    exp.check_extras()
    config_dict = exp.make_config(overrides).model_dump(mode="json")
    store = ResultStore(store_path if store_path is not None else default_store_path(out_dir))
    with signals_raise(), Heartbeat(store.beat):
        run_id = store.start(name, config_dict)
        try:
            folder = claim_folder(out_dir, run_id)
            store.set_out_dir(run_id, folder.resolve())
            result, doc = execute(name, overrides, folder, run_id, progress)
        except (KeyboardInterrupt, RunInterrupted) as exc:
            store.interrupt(run_id, interrupt_reason(exc))
            raise
        except BaseException:
            store.fail(run_id, traceback.format_exc())
            raise
        store.finish(run_id, doc)
    return RecordedRun(run_id, folder, result)


def result_document(
    result: Result, config: Mapping[str, Any] | None = None, seconds: float | None = None
) -> dict[str, Any]:
    """The content of ``result.json`` as plain JSON values."""
    return to_jsonable(
        {
            "experiment": result.experiment,
            "config": result.config or dict(config or {}),
            "metrics": result.metrics,
            "claims": [
                {"text": c.text, "holds": bool(c.holds), "evidence": c.evidence}
                for c in result.claims
            ],
            "tables": result.tables,
            "notes": result.notes,
            "artifacts": result.artifacts,
            "wall_seconds": seconds,
            "risk": result.risk,
        }
    )


def write_artifacts(result: Result, out_dir: Path) -> dict[str, str]:
    """Save ``result.images`` and ``result.figures`` as PNG; return name -> relative path."""
    paths: dict[str, str] = {}
    for kind, items in (("images", result.images), ("figures", result.figures)):
        for name, item in items.items():
            rel = Path(kind) / f"{_slug(name)}.png"
            (out_dir / kind).mkdir(exist_ok=True)
            if hasattr(item, "savefig"):
                _save_figure(item, out_dir / rel)
            else:
                save_png(np.asarray(item), out_dir / rel)
            paths[f"{kind}/{name}"] = rel.as_posix()
    return paths


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "unnamed"


def _save_figure(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    pyplot = sys.modules.get("matplotlib.pyplot")  # close only if the caller used pyplot
    if pyplot is not None:
        pyplot.close(fig)


def save_png(image: np.ndarray, path: Path) -> None:
    """Save ``(H, W)``, ``(H, W, 1)``, ``(H, W, 3)`` or ``(H, W, 4)`` as PNG.

    Floats are read as ``[0, 1]`` (clipped, NaN as 0); ``uint8`` is written unchanged.
    """
    arr = image[..., 0] if image.ndim == 3 and image.shape[-1] == 1 else image
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] not in (3, 4)):
        raise ShapeError(f"cannot save an image of shape {image.shape} as PNG")
    if arr.dtype != np.uint8:
        arr = np.round(np.clip(np.nan_to_num(arr.astype(np.float64)), 0.0, 1.0) * 255)
        arr = arr.astype(np.uint8)
    Image.fromarray(arr).save(path, format="PNG")
