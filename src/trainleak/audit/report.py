"""A static, self-contained HTML report of one or more runs.

Sources are result folders (holding ``result.json``), folders of result folders (e.g. an audit
output root), or an SQLite store (every row, including failed and running ones). The page opens
with an index of every run (its verdict, strongest attack and bound) and a plot of each run's
strongest attack against its strongest bound. Per run the page shows first its risk card
(:mod:`trainleak.audit.report_card`), then the status, the metrics, every table, each claim
with a holds / does-not-hold mark and its evidence, the notes, the error text of a failed run,
and the PNG images and figures embedded as base64, so the page can be moved or mailed alone.
All text is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from trainleak.audit.report_card import CARD_CSS, LEVEL_TITLES, card_html, index_plot
from trainleak.audit.runner import RESULT_FILE
from trainleak.audit.store import ResultStore, RunRecord
from trainleak.errors import DataNotFoundError

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1100px;padding:0 1rem;color:#1d232a;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-bottom:2px solid #d0d7de;padding-bottom:.3rem;
margin-top:2.5rem}h3{font-size:1.05rem;margin-top:1.4rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f3f5f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
.status{display:inline-block;padding:.05rem .5rem;border-radius:.8rem;font-size:.8rem}
.done{background:#dafbe1;color:#116329}.failed{background:#ffebe9;color:#a40e26}
.running{background:#fff8c5;color:#7d4e00}.interrupted{background:#eaeef2;color:#424a53}
ul.claims{list-style:none;padding-left:0}ul.claims li{margin:.5rem 0;padding:.4rem .6rem;
border-left:4px solid}li.holds{border-color:#1a7f37;background:#f0fff4}
li.fails{border-color:#cf222e;background:#fff5f5}.mark{font-weight:700;margin-right:.4rem}
li.holds .mark{color:#1a7f37}li.fails .mark{color:#cf222e}.evidence{font-size:.82rem;color:#57606a}
pre{background:#f6f8fa;padding:.7rem;overflow-x:auto;font-size:.8rem;white-space:pre-wrap}
.notes{white-space:pre-wrap}figure{display:inline-block;margin:.5rem 1rem .5rem 0}
figure img{max-width:100%;image-rendering:pixelated;border:1px solid #d0d7de}
figcaption{font-size:.8rem;color:#57606a}
"""


@dataclass
class RunView:
    """What the report shows of one run (from ``result.json`` and/or a store row)."""

    title: str
    experiment: str
    status: str = "done"
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: str = ""
    images: dict[str, Path] = field(default_factory=dict)
    error: str | None = None
    seconds: float | None = None
    risk: dict[str, Any] | None = None


def write_report(sources: Sequence[str | Path], out_html: str | Path) -> Path:
    """Render the runs found in ``sources`` as one HTML page.

    Args:
        sources: result folders, folders of result folders, or SQLite store files.
        out_html: the page to write (parent folders are created).

    Returns:
        The path written.

    Raises:
        DataNotFoundError: when a source does not exist or holds no result.
    """
    runs = [view for src in sources for view in load_runs(Path(src))]
    out = Path(out_html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(runs), encoding="utf-8")
    return out


def load_runs(source: Path) -> list[RunView]:
    """The runs in one source (see :func:`write_report`).

    A store is opened read-only (the report never writes to it) and must be a trainleak
    store; a run's files are read only from its own folder, and only when that folder's
    ``result.json`` names the same run.

    Raises:
        StoreError: ``source`` is a file but not a trainleak store.
    """
    if source.is_file() and source.name != RESULT_FILE:
        records = ResultStore(source, readonly=True).rows()  # refuses a non-trainleak file
        shared = Counter(rec.out_dir for rec in records if rec.out_dir)
        return [_from_record(rec, shared[rec.out_dir or ""] == 1) for rec in records]
    if source.is_file():
        source = source.parent
    if (source / RESULT_FILE).is_file():
        return [_from_result_dir(source)]
    children = sorted(p.parent for p in source.glob(f"*/{RESULT_FILE}")) if source.is_dir() else []
    if not children:
        raise DataNotFoundError(
            f"no results in {str(source)!r}: expected an SQLite store, a folder with "
            f"{RESULT_FILE}, or a folder of such folders"
        )
    return [_from_result_dir(p) for p in children]


def _read_doc(folder: Path) -> dict[str, Any]:
    path = folder / RESULT_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataNotFoundError(f"{str(path)!r} is not a readable result file: {exc}") from None
    if not isinstance(doc, dict):
        raise DataNotFoundError(f"{str(path)!r} is not a result file (not a JSON object)")
    return doc


def _from_result_dir(folder: Path, base: RunView | None = None) -> RunView:
    doc = _read_doc(folder)
    view = base or RunView(title=folder.name, experiment=str(doc.get("experiment", "")))
    view.config = doc.get("config") or view.config
    view.metrics = doc.get("metrics") or view.metrics
    view.claims = doc.get("claims") or view.claims
    view.tables = doc.get("tables") or {}
    view.notes = doc.get("notes") or ""
    view.seconds = doc.get("wall_seconds")
    artifacts = doc.get("artifacts")
    view.images = _images(folder, artifacts if isinstance(artifacts, dict) else {})
    view.risk = doc.get("risk") if isinstance(doc.get("risk"), dict) else None
    return view


def _images(folder: Path, artifacts: Mapping[str, str]) -> dict[str, Path]:
    """PNG artifacts that lie inside ``folder`` (after resolving links); others are dropped."""
    root = folder.resolve()
    found = {}
    for name, rel in artifacts.items():
        path = (folder / str(rel)).resolve()
        if str(rel).lower().endswith(".png") and path.is_relative_to(root) and path.is_file():
            found[name] = path
    return found


def _owns(doc: Mapping[str, Any], rec: RunRecord, sole: bool) -> bool:
    """Whether ``result.json`` document ``doc`` is run ``rec``'s: it names the run, or (written
    before result files named their run) it is the only run of the store in that folder, with
    the same experiment and config."""
    if doc.get("run_id") is not None:
        return bool(doc["run_id"] == rec.id)
    return sole and doc.get("experiment") == rec.experiment and doc.get("config") == rec.config


def _from_record(rec: RunRecord, sole: bool = True) -> RunView:
    folder = Path(rec.out_dir) if rec.out_dir else None
    view = RunView(
        title=f"run {rec.id}: {rec.experiment}" + (f" ({folder.name})" if folder else ""),
        experiment=rec.experiment,
        status=rec.status,
        config=rec.config,
        metrics=rec.metrics,
        claims=rec.claims,
        error=rec.error,
    )
    if folder is not None and (folder / RESULT_FILE).is_file():
        try:
            doc = _read_doc(folder)
        except DataNotFoundError:
            doc = {}
        if _owns(doc, rec, sole):
            return _from_result_dir(folder, view)
    return view


def render_page(runs: Sequence[RunView]) -> str:
    """The whole HTML document for ``runs``."""
    body = [
        "<h1>trainleak report</h1>",
        f"<p>{len(runs)} run(s).</p>",
        _index(runs),
        index_plot([(str(i), run.risk or {}) for i, run in enumerate(runs)]),
        *(_section(i, run) for i, run in enumerate(runs)),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>trainleak report</title>"
        f"<style>{_CSS}{CARD_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _index(runs: Sequence[RunView]) -> str:
    rows = []
    for i, run in enumerate(runs):
        held = sum(bool(c.get("holds")) for c in run.claims)
        risk = run.risk or {}
        level = str(risk.get("level", "none"))
        attack, bound = risk.get("attack") or {}, risk.get("bound") or {}
        rows.append(
            f'<tr><td class="num">{i}</td><td><a href="#run-{i}">{_e(run.title)}</a></td>'
            f"<td>{_e(run.experiment)}</td><td>{_status(run.status)}</td>"
            f'<td><span class="badge b-{_e(level)}">{_e(LEVEL_TITLES.get(level, level))}'
            f"</span></td><td>{_e(str(attack.get('attack', '–')))}</td>"
            f"<td>{_e(str(bound.get('name', '–')))}</td>"
            f'<td class="num">{held} / {len(run.claims)}</td>'
            f'<td class="num">{_e(_fmt(run.seconds))}</td></tr>'
        )
    head = (
        "<tr><th>#</th><th>run</th><th>experiment</th><th>status</th><th>verdict</th>"
        "<th>strongest attack</th><th>strongest bound</th><th>claims holding</th>"
    )
    return f"<table>{head}<th>seconds</th></tr>{''.join(rows)}</table>"


def _section(i: int, run: RunView) -> str:
    parts = [f'<h2 id="run-{i}">{_e(run.title)} {_status(run.status)}</h2>']
    if run.status == "done":
        parts.append(card_html(run.risk, run.claims))
    if run.error:
        parts.append(f"<h3>Error</h3><pre>{_e(run.error)}</pre>")
    if run.claims:
        parts.append("<h3>Claims</h3>" + _claims(run.claims))
    if run.metrics:
        parts.append(
            "<h3>Metrics</h3>" + _table([{"metric": k, "value": v} for k, v in run.metrics.items()])
        )
    for name, rows in run.tables.items():
        parts.append(f"<h3>Table: {_e(name)}</h3>" + _table(rows))
    if run.images:
        parts.append("<h3>Images</h3>" + "".join(_figure(n, p) for n, p in run.images.items()))
    if run.notes:
        parts.append(f'<h3>Notes</h3><div class="notes">{_e(run.notes)}</div>')
    config = json.dumps(run.config, indent=2, sort_keys=True)
    parts.append(f"<details><summary>Config</summary><pre>{_e(config)}</pre></details>")
    return "\n".join(parts)


def _claims(claims: Iterable[Mapping[str, Any]]) -> str:
    items = []
    for claim in claims:
        holds = bool(claim.get("holds"))
        mark = "&#10004; holds" if holds else "&#10008; does not hold"
        evidence = ", ".join(f"{k} = {_fmt(v)}" for k, v in (claim.get("evidence") or {}).items())
        items.append(
            f'<li class="{"holds" if holds else "fails"}"><span class="mark">{mark}</span>'
            f'{_e(str(claim.get("text", "")))}<div class="evidence">evidence: '
            f"{_e(evidence or 'none recorded')}</div></li>"
        )
    return f'<ul class="claims">{"".join(items)}</ul>'


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "<p>(empty)</p>"
    keys = list(dict.fromkeys(k for row in rows for k in row))
    head = "".join(f"<th>{_e(str(k))}</th>" for k in keys)
    body = "".join("<tr>" + "".join(_cell(row.get(k)) for k in keys) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: Any) -> str:
    cls = ' class="num"' if isinstance(value, int | float) and not isinstance(value, bool) else ""
    return f"<td{cls}>{_e(_fmt(value))}</td>"


def _figure(name: str, path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    with Image.open(path) as img:
        width = img.size[0]
    width *= max(1, 400 // max(width, 1))  # small grids are scaled up by a whole factor
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{_e(name)}" width="{width}">'
        f"<figcaption>{_e(name)}</figcaption></figure>"
    )


def _status(status: str) -> str:
    cls = status if status in ("done", "failed", "running", "interrupted") else "running"
    return f'<span class="status {cls}">{_e(status)}</span>'


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, list | dict):
        text = json.dumps(value)
        return text if len(text) <= 120 else text[:117] + "..."
    return str(value)


def _e(text: str) -> str:
    return html.escape(text, quote=True)
