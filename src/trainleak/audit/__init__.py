"""Running, recording and reporting experiments.

:func:`run_experiment` runs one experiment and writes its files; :class:`ResultStore` keeps one
SQLite row per run; :func:`run_grid` runs a YAML grid of configs (skipping finished points);
:func:`write_report` renders runs as a self-contained HTML page.
"""

from trainleak.audit.grid import (
    GridJob,
    GridOutcome,
    expand_grid,
    load_grid,
    run_grid,
)
from trainleak.audit.report import load_runs, write_report
from trainleak.audit.runner import (
    RESULT_FILE,
    STORE_FILE,
    default_store_path,
    result_document,
    run_experiment,
    save_png,
)
from trainleak.audit.serialize import dumps, to_jsonable
from trainleak.audit.store import ResultStore, RunRecord, config_hash

__all__ = [
    "RESULT_FILE",
    "STORE_FILE",
    "GridJob",
    "GridOutcome",
    "ResultStore",
    "RunRecord",
    "config_hash",
    "default_store_path",
    "dumps",
    "expand_grid",
    "load_grid",
    "load_runs",
    "result_document",
    "run_experiment",
    "run_grid",
    "save_png",
    "to_jsonable",
    "write_report",
]
