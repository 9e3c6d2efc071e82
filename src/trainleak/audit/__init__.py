"""Running, recording and reporting experiments.

:func:`record_run` (and :func:`run_experiment`) runs one experiment in its own folder and
writes its files; :class:`ResultStore` keeps one SQLite row per run, owned by a live process
while it runs; :func:`run_grid` runs a YAML grid of configs (skipping finished points);
:func:`write_report` renders runs as a self-contained HTML page.
"""

from trainleak.audit._signals import RunInterrupted
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
    RecordedRun,
    claim_folder,
    default_store_path,
    record_run,
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
    "RecordedRun",
    "ResultStore",
    "RunInterrupted",
    "RunRecord",
    "claim_folder",
    "config_hash",
    "default_store_path",
    "dumps",
    "expand_grid",
    "load_grid",
    "load_runs",
    "record_run",
    "result_document",
    "run_experiment",
    "run_grid",
    "save_png",
    "to_jsonable",
    "write_report",
]
