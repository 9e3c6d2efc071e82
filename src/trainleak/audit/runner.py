"""Run one experiment: validate, record in the store, run, write its files.

:func:`run_experiment` is what the CLI's ``run`` command and the grid workers call. It writes
into ``out_dir``:

- ``result.json``: experiment, config, metrics, claims (text, holds, evidence), tables, notes,
  artifacts, wall seconds (see :mod:`trainleak.audit.serialize` for the JSON rules);
- ``images/<name>.png`` for every ``result.images`` entry (Pillow);
- ``figures/<name>.png`` for every ``result.figures`` entry (matplotlib's ``savefig``; no
  backend is switched globally).
"""

from __future__ import annotations

import re
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from trainleak.audit.serialize import dumps, to_jsonable
from trainleak.audit.store import ResultStore
from trainleak.errors import ShapeError
from trainleak.experiments import get_experiment
from trainleak.experiments.base import Result
from trainleak.progress import Progress

RESULT_FILE = "result.json"
STORE_FILE = "trainleak.sqlite"


def default_store_path(out_dir: str | Path) -> Path:
    """The store used when none is given: ``<out_dir>/../trainleak.sqlite``."""
    return Path(out_dir).resolve().parent / STORE_FILE


def run_experiment(
    name: str,
    overrides: Mapping[str, Any] | None,
    out_dir: str | Path,
    *,
    store_path: str | Path | None = None,
    progress: Progress | None = None,
) -> Result:
    """Run experiment ``name`` with config ``overrides`` and record it.

    Args:
        name: a registered experiment.
        overrides: config values; everything else keeps the experiment's defaults.
        out_dir: folder for ``result.json``, images and figures (created if missing).
        store_path: the SQLite store; default :func:`default_store_path`.
        progress: callback ``progress(task, done, total)`` handed to the experiment.

    Returns:
        The experiment's :class:`~trainleak.experiments.Result`, with ``artifacts`` filled in
        (paths relative to ``out_dir``).

    Raises:
        ConfigError: for an unknown experiment or invalid overrides (nothing is recorded).
        Exception: whatever the experiment raises, after its row is marked ``failed`` with the
            traceback.
    """
    exp = get_experiment(name)
    config = exp.make_config(overrides)
    config_dict = config.model_dump(mode="json")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    store = ResultStore(store_path if store_path is not None else default_store_path(out))
    run_id = store.start(name, config_dict, out.resolve())
    start = time.perf_counter()
    try:
        result = exp.run(config, progress)
        result.artifacts.update(write_artifacts(result, out))
        result.artifacts["result"] = RESULT_FILE
        seconds = time.perf_counter() - start
        (out / RESULT_FILE).write_text(
            dumps(result_document(result, config_dict, seconds), indent=2)
        )
    except BaseException:
        store.fail(run_id, traceback.format_exc())
        raise
    store.finish(run_id, result)
    return result


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
