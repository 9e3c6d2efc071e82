"""The import layers of the package (docs/architecture.md): imports only point downwards.

Every ``import`` counts, including those inside functions, so no cycle can be hidden by a lazy
import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import trainleak

ROOT = Path(trainleak.__file__).parent

# Lower rank = lower layer. A module may import its own package, its own layer or lower ones.
LAYERS: dict[str, int] = {
    "errors": 0,
    "progress": 0,
    "_discovery": 0,
    "linalg": 0,
    "parallel": 0,
    "validation": 0,
    "data": 1,
    "models": 1,
    "metrics": 2,
    "releases": 3,
    "bounds": 4,
    "defenses": 5,
    "systems": 6,
    "attacks": 6,
    "scenarios": 7,
    "experiments": 8,
    "audit": 9,
    "cli": 10,
    "cli_bound": 10,
    "cli_assess": 10,
    "__init__": 10,
}
# Pairs that must not meet whatever their ranks: simulators produce releases and attacks consume
# them (same rank); and an attack sees only the release and the knowledge, so it never imports
# scoring code (metrics score against ground truth; choices made by scoring, such as a step
# budget fixed on a labelled calibration split, belong to the scenario).
FORBIDDEN = {("attacks", "systems"), ("systems", "attacks"), ("attacks", "metrics")}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.append((node.lineno, "<relative>"))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
    return [(ln, m) for ln, m in found if m == "<relative>" or m.split(".")[0] == "trainleak"]


def _violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        src_layer = rel.parts[0].removesuffix(".py")
        if src_layer not in LAYERS:
            bad.append(f"{rel}: package {src_layer!r} has no layer in LAYERS")
            continue
        for line, module in _imports(path):
            if module == "<relative>":
                bad.append(f"{rel}:{line}: relative import")
                continue
            dst = _top(module)
            if dst == src_layer:
                continue
            if dst not in LAYERS:
                bad.append(f"{rel}:{line}: imports {module}, whose package has no layer")
            elif LAYERS[dst] > LAYERS[src_layer] or (src_layer, dst) in FORBIDDEN:
                bad.append(
                    f"{rel}:{line}: {src_layer} (layer {LAYERS[src_layer]}) imports "
                    f"{module} (layer {LAYERS[dst]})"
                )
    return bad


def test_imports_point_downwards() -> None:
    bad = _violations()
    assert not bad, "imports that run back up the layers:\n" + "\n".join(bad)


def test_no_function_level_import_of_the_package() -> None:
    """Imports of trainleak sit at module level: none hides a cycle inside a function."""
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import) and node.col_offset > 0:
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                )
                if any(n.split(".")[0] == "trainleak" for n in names):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, f"function-level imports of trainleak: {bad}"


def test_no_assert_in_library_code() -> None:
    """Library code narrows types and checks invariants with explicit raises, never assert
    (asserts vanish under ``python -O``)."""
    bad = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(ROOT.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assert)
    ]
    assert not bad, f"assert statements in library code: {bad}"


def test_checker_catches_an_upward_import(tmp_path: Path, monkeypatch) -> None:
    """The check itself can fail: a metrics module importing an attack is reported."""
    fake = tmp_path / "trainleak"
    (fake / "metrics").mkdir(parents=True)
    (fake / "metrics" / "bad.py").write_text("from trainleak.attacks.base import Attack\n")
    (fake / "attacks").mkdir()
    (fake / "attacks" / "bad.py").write_text("def f():\n    from trainleak.systems import x\n")
    monkeypatch.setattr(f"{__name__}.ROOT", fake)
    bad = _violations()
    assert any("metrics/bad.py:1" in b for b in bad)
    assert any("attacks/bad.py:2" in b for b in bad)
