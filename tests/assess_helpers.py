"""Running ``trainleak assess`` through the CLI in tests, as a user would."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from trainleak import cli

runner = CliRunner()


def assess_cli(
    release: Path, knowledge: Path, private: Path, out: Path, sets: Sequence[str] = ()
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``trainleak assess`` on files; returns the attacks table by name and the result."""
    res = runner.invoke(
        cli.app,
        ["assess", "--release", str(release), "--knowledge", str(knowledge),
         "--private", str(private), "--out", str(out), *[a for s in sets for a in ("--set", s)]],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads((out / "result.json").read_text())
    return {row["attack"]: row for row in doc["tables"]["attacks"]}, doc
