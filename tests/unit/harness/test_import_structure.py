"""The framework packages have no import circles: each module imports alone, first, in a fresh
interpreter, and no chain of module-level or function-level imports leads back to itself.

A trial class does not import its controller; `pedl.harness.controllers` maps trial classes to
controllers, so a user's `from pedl.pytorch import PyTorchTrial` pulls in no training loop.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[3] / "sdk"
PACKAGES = ("pytorch", "keras", "tensorflow", "simple")
ALONE = [
    "pedl.pytorch",
    "pedl.pytorch._trial",
    "pedl.pytorch._controller",
    "pedl.pytorch._checkpoint",
    "pedl.keras",
    "pedl.keras._trial",
    "pedl.keras._controller",
    "pedl.keras._checkpoint",
    "pedl.tensorflow",
    "pedl.tensorflow._trial",
    "pedl.tensorflow._controller",
    "pedl.tensorflow._checkpoint",
    "pedl.tensorflow._estimator",
    "pedl.simple",
    "pedl.simple._trial",
    "pedl.simple._controller",
    "pedl.harness.controllers",
]


@pytest.mark.parametrize("module", ALONE)
def test_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SDK).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """pedl modules `path` imports anywhere except under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import submodule` depends on the submodule, `from pkg import name` on pkg.
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m.startswith("pedl.")}


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in sorted((SDK / "pedl").rglob("*.py"))}
    graph = {name: _imports(path, name, set(paths)) for name, path in paths.items()}
    for name in graph:  # only edges between real modules (not "pkg.attr" names)
        graph[name] = {m for m in graph[name] if m in graph and m != name}
    return graph


def test_trial_modules_do_not_import_their_controllers() -> None:
    graph = _graph()
    for package in PACKAGES:
        reached, todo = set(), [f"pedl.{package}._trial"]
        while todo:
            for nxt in graph[todo.pop()] - reached:
                reached.add(nxt)
                todo.append(nxt)
        assert f"pedl.{package}._controller" not in reached, package


def test_framework_packages_have_no_import_circles() -> None:
    graph = _graph()

    circles: list[list[str]] = []

    def walk(node: str, trail: list[str], seen: set[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt == trail[0]:
                circles.append([*trail, nxt])
            elif nxt not in seen and nxt > trail[0]:
                seen.add(nxt)
                walk(nxt, [*trail, nxt], seen)

    starts = [n for n in graph if any(n.startswith(f"pedl.{p}") for p in (*PACKAGES, "harness", "trial"))]
    for start in sorted(starts):
        walk(start, [start], {start})
    # A package importing its own submodules (pedl.keras -> pedl.keras._trial) is no circle unless
    # a submodule imports the package back, which the walk above reports.
    assert circles == [], "\n".join(" -> ".join(c) for c in circles)
