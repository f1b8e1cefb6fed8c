"""Fails naming every import circle in pedl's product code (sdk/ and services/).

Every import counts: module level, inside a function (it still ties the two files together), and
under `if TYPE_CHECKING:` (a type that names the other side is a dependency a reader must follow
too). Modules are named as Python imports them: setup.py's package mapping (services/scheduler is
`pedl_scheduler`, ...), plus sdk/compat/determined as `determined`. `from pkg import sub` ties to the
submodule, `from pkg import name` to the package.

No circle is allowed, the experiment core's included (its rooms meet only in its dispatcher).

    .venv/bin/python scripts/import_graph.py          # exit 1 on a circle
    .venv/bin/python scripts/import_graph.py --edges  # also print every edge, for reading
    .venv/bin/python scripts/import_graph.py --root DIR  # another checkout (its setup.py, sdk/, services/)
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import deque
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Beside setup.py's packages: pedl's own `determined` (shipped inside the wheel, see setup.py).
EXTRA_ROOTS = {"determined": "sdk/compat/determined"}


def package_roots(setup_py: Path) -> dict[str, Path]:
    """setup.py's ROOTS (import name -> folder), read without running setup.py."""
    for node in ast.walk(ast.parse(setup_py.read_text())):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "ROOTS" for t in node.targets
        ):
            mapping = ast.literal_eval(node.value)
            return {name: setup_py.parent / folder for name, folder in mapping.items()}
    raise SystemExit(f"{setup_py}: no ROOTS mapping")


def find_modules(roots: dict[str, Path]) -> dict[str, Path]:
    """Every module's dotted name and file."""
    found: dict[str, Path] = {}
    for name, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The product modules `name` imports, wherever in the file the import is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")
                parents = parents[: len(parents) - node.level + 1]
                base = ".".join([*parents, base] if base else parents)
            targets += [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out: set[str] = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)
    return out


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of two or more modules that reach each other (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def one_ring(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path around the group from its first module back to it: the circle to read."""
    members, start = set(group), group[0]
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & members):
            if child == start:
                ring = [node]
                while ring[-1] != start:
                    ring.append(came_from[ring[-1]])
                return [start, *reversed(ring[:-1]), start]
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    return group


def build_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[str, Path]]:
    extra = {name: root / folder for name, folder in EXTRA_ROOTS.items() if (root / folder).is_dir()}
    roots = package_roots(root / "setup.py") | extra
    known = find_modules(roots)
    return {name: imported(name, path, known) for name, path in known.items()}, known


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="print every import edge too")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to read (default: this one)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    graph, known = build_graph(root)
    if args.edges:
        for name in sorted(graph):
            for target in sorted(graph[name]):
                print(f"{name} -> {target}")
    groups = strongly_connected(graph)
    for group in groups:
        ring = one_ring(group, graph)
        print(
            f"import circle: {' -> '.join(ring)}"
            + (f" (and {len(group)} modules in all)" if len(group) > 2 else "")
        )
        for module in group:
            print(f"    {module}: {known[module].relative_to(root)}")
    edges = sum(len(t) for t in graph.values())
    print(f"import graph: {len(graph)} modules, {edges} imports, {len(groups)} circle(s)")
    return 1 if groups else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
