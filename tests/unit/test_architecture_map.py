"""docs/ARCHITECTURE.md's "Where to find" table stays true: each row's file exists and defines the
name the row says does the job, so a reader who follows it lands on the code, not on a stale path."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
# Concepts a reader asks for first (issue #35): each must have a row.
REQUIRED = ("restart policy", "liveness", "training loop", "API surface", "web UI's data", "SQL", "sandbox")


def _rows() -> list[tuple[str, str, str]]:
    text = DOC.read_text()
    section = text.split("## Where to find", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("concern", "") or set(cells[0]) <= {"-"}:
            continue
        file, symbol = cells[1].strip("`"), cells[2].strip("`")
        rows.append((cells[0], file, symbol))
    return rows


def _defines(path: Path, symbol: str) -> bool:
    if path.suffix == ".proto":
        return (
            re.search(rf"^(service|message|enum) {re.escape(symbol)}\b", path.read_text(), re.M) is not None
        )
    body: list[ast.stmt] = ast.parse(path.read_text()).body
    for part in symbol.split("."):
        found = None
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == part:
                found = node
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == part for t in node.targets
            ):
                found = node
            elif (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == part
            ):
                found = node
        if found is None:
            return False
        body = found.body if isinstance(found, ast.ClassDef) else []
    return True


def test_the_table_covers_the_concepts_readers_look_for() -> None:
    concerns = " / ".join(concern for concern, _, _ in _rows())
    missing = [c for c in REQUIRED if c.lower() not in concerns.lower()]
    assert not missing, f"no row in ARCHITECTURE.md's Where to find for: {missing}"


@pytest.mark.parametrize(("concern", "file", "symbol"), _rows(), ids=lambda v: str(v)[:40])
def test_each_row_names_a_file_that_defines_its_symbol(concern: str, file: str, symbol: str) -> None:
    path = ROOT / file
    assert path.is_file(), f"{concern!r}: {file} does not exist"
    assert _defines(path, symbol), f"{concern!r}: {file} defines no {symbol}"


def test_a_stale_row_is_caught(tmp_path: Path) -> None:
    stale = tmp_path / "m.py"
    stale.write_text("class Kept:\n    def method(self) -> None: ...\n\nLIMIT = 3\n")
    assert _defines(stale, "Kept.method") and _defines(stale, "LIMIT")
    assert not _defines(stale, "Gone") and not _defines(stale, "Kept.gone")
