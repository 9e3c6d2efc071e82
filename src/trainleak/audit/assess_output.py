"""Writing an assessment like any run: ``result.json`` with its risk card, images, a store row,
and an HTML report whose first section is the card.

:func:`run_assessment` is what ``trainleak assess`` and ``trainleak attack`` call: it reads and
checks every input file first (a bad file records nothing), then records the run in the store,
assesses, writes the files and the report.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainleak.audit.assess import (
    Assessment,
    as_knowledge,
    as_loaded,
    assess,
    complete_knowledge,
    read_reference,
)
from trainleak.audit.report import write_report
from trainleak.audit.runner import (
    RESULT_FILE,
    claim_folder,
    default_store_path,
    result_document,
    write_artifacts,
)
from trainleak.audit.serialize import dumps
from trainleak.audit.store import ResultStore
from trainleak.experiments.base import Result
from trainleak.experiments.risk import certainty_phrase
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge

ASSESS = "assess"
REPORT_FILE = "report.html"


def run_assessment(
    release: str | Path,
    knowledge: str | Path | None,
    out_dir: str | Path,
    *,
    private: str | Path | None = None,
    attacks: Sequence[str] | None = None,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int = 0,
    store_path: str | Path | None = None,
    progress: Progress | None = None,
) -> tuple[Assessment, Path]:
    """Assess ``release`` and write ``result.json``, images and ``report.html`` to ``out_dir``
    (or, when an earlier run holds it, to the first free ``out_dir-2``, ``out_dir-3``, ...).

    Returns:
        The assessment and the path of its HTML report.

    Raises:
        ReleaseFileError, ConfigError: an invalid input (nothing is recorded or run).
    """
    loaded = as_loaded(release)
    know = complete_knowledge(loaded, as_knowledge(knowledge))
    ref = read_reference(private, know, loaded.kind == "language_model")
    config = {
        "release": str(loaded.source),
        "knowledge": str(knowledge) if knowledge is not None else None,
        "reference_set": str(private) if private is not None else None,
        "attacks": list(attacks) if attacks else "all applicable",
        "settings": {k: dict(v) for k, v in (settings or {}).items()},
        "seed": seed,
    }
    store = ResultStore(store_path if store_path is not None else default_store_path(out_dir))
    run_id = store.start(ASSESS, config)
    start = time.perf_counter()
    try:
        # a fresh folder: ``out_dir`` if free, else ``out_dir-2``, ... (a rerun never writes
        # over an earlier assessment, as for ``trainleak run``)
        out = claim_folder(out_dir, run_id)
        store.set_out_dir(run_id, out.resolve())
        assessment = assess(
            loaded, know, private=ref, attacks=attacks, settings=settings, seed=seed,
            progress=progress,
        )  # fmt: skip
        result = assessment_result(assessment, config)
        result.artifacts.update(write_artifacts(result, out))
        result.artifacts["result"] = RESULT_FILE
        doc = result_document(result, config, time.perf_counter() - start)
        (out / RESULT_FILE).write_text(dumps(doc, indent=2))
    except BaseException:
        store.fail(run_id, traceback.format_exc())
        raise
    store.finish(run_id, result)
    return assessment, write_report([out], out / REPORT_FILE)


def assessment_result(a: Assessment, config: Mapping[str, Any]) -> Result:
    """The assessment as a run result: metrics, tables, labelled image grids, notes, card."""
    card = a.card
    metrics: dict[str, Any] = {
        "verdict": card.level,
        "attacks_run": card.attacks_run,
        "bounds_applicable": len(a.bounds),
        "reference_set_size": a.reference_size,
    }
    if card.attack is not None:
        metrics.update(
            strongest_attack=card.attack.attack,
            records_recovered=card.attack.recovered,
            records_of=card.attack.of,
        )
    if card.bound is not None:
        metrics.update(strongest_bound=card.bound.name, bound_value=card.bound.value)
    res = Result(experiment=ASSESS, config=dict(config), metrics=metrics, risk=card)
    res.tables = {
        "attacks": [_attack_row(r) for r in a.runs],
        "attack metrics": [
            {"attack": r.name, **r.scored.metrics} for r in a.runs if r.scored is not None
        ],
        "bounds": [_bound_row(b) for b in a.bounds],
        "bounds not applicable": [{"bound": s.name, "reason": s.reason} for s in a.skipped_bounds],
        "knowledge the attacks saw": [_knowledge_row(a.knowledge)],
    }
    for r in a.runs:
        if r.scored is not None and r.scored.grid is not None:
            res.images[r.name] = r.scored.grid
    res.notes = _notes(a)
    return res


def _attack_row(r: Any) -> dict[str, Any]:
    f = r.scored.finding if r.scored is not None else None
    return {
        "attack": r.name,
        "status": r.status,
        "reason": r.reason,
        "candidates": f.candidates if f else None,
        "recovered": f.recovered if f else None,
        "of": f.of if f else None,
        "baseline recovered": f.baseline_recovered if f else None,
        "certified": f.certified if f else None,
        "quality": f.quality if f else None,
        "measured as": f.quality_metric if f else "",
        "certainty": certainty_phrase(f) if f else "",
        "own evidence": f.detail if f else "",
        "seconds": r.seconds,
    }


def _bound_row(b: Any) -> dict[str, Any]:
    return {
        "bound": b.name,
        "value": b.value,
        "unit": b.unit,
        "kind": b.kind,
        "valid for every attack": b.general,
        "statement": b.statement,
        "assumptions": b.assumptions,
    }


def _knowledge_row(k: Knowledge) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name in ("input_shape", "value_range", "label_set", "n_records", "active", "record_norm"):
        row[name] = getattr(k, name)
    for name in ("labels", "prior", "subspace_basis"):
        t = getattr(k, name)
        row[name] = None if t is None else f"tensor {tuple(t.shape)}"
    row["other_records"] = None if k.other_records is None else len(k.other_records[0])
    row["auxiliary"] = None if k.auxiliary is None else len(k.auxiliary[0])
    row["generative_prior"] = None if k.generative_prior is None else "a decoder"
    row["candidate_texts"] = None if k.candidate_texts is None else len(k.candidate_texts)
    return row


def _notes(a: Assessment) -> str:
    if a.reference_size and a.release.kind == "language_model":
        ref = (
            f"Membership scores were judged against the {a.reference_size} training texts given "
            "as the reference set, read only after every attack had run: training texts among "
            "the candidates identified at a false-positive rate of at most 1 % on the other "
            "candidates, against what a score blind to membership identifies by chance."
        )
    elif a.reference_size:
        ref = (
            f"Reconstructions were scored against a reference set of {a.reference_size} records, "
            "read only after every attack had run; a baseline given the same number of candidates "
            "(prior samples and the prior mean when the knowledge has a prior or auxiliary "
            "records, else uniform noise in the value range) was scored the same way."
        )
    else:
        ref = (
            "No reference set was given: only the attacks' own certificates and fits are "
            "reported, and the image grids show unverified candidates."
        )
    return (
        f"Release: {a.card.release}. Attacks saw the release and the knowledge listed in the "
        f"table 'knowledge the attacks saw' (shapes the release declares were filled in). {ref}"
    )
