"""What to write when a model definition's __init__.py exposes no Trial: the Trial classes and
PEDL 0.11 data functions its top-level modules define, found by reading them (nothing is imported).

PEDL 0.11's documentation requires a directory model definition's __init__.py to expose the Trial
and make_data_loaders unless the config names them (`entrypoints:`); its examples' search configs
that name neither beside an empty __init__.py were refused there too. pedl refuses them the same
way, naming the `entrypoints:` (or `entrypoint:`) line that the folder's own code calls for."""

from __future__ import annotations

import ast
from pathlib import Path

_DATA_FUNCTIONS = ("make_data_loaders", "download_data")


def _definitions(path: Path) -> tuple[list[str], list[str]]:
    """The Trial-like classes (a base named ...Trial) and the PEDL data functions `path` defines."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return [], []
    classes, functions = [], []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
            if any(name.endswith("Trial") for name in bases):
                classes.append(node.name)
        elif isinstance(node, ast.FunctionDef) and node.name in _DATA_FUNCTIONS:
            functions.append(node.name)
    return classes, functions


def suggested_entrypoint(directory: Path) -> str | None:
    """`entrypoints: {...}` (with PEDL 0.11's data functions) or `entrypoint: module:Class` for the
    Trial classes the top-level modules define (several: "<one of A, B>"); None when there are none."""
    trials: list[str] = []
    data: dict[str, str] = {}
    for path in sorted(directory.glob("*.py")):
        if path.name == "__init__.py":
            continue
        classes, functions = _definitions(path)
        trials += [f"{path.stem}:{c}" for c in classes]
        for name in functions:
            data.setdefault(name, f"{path.stem}:{name}")
    if not trials:
        return None
    trial = trials[0] if len(trials) == 1 else f"<one of {', '.join(trials)}>"
    if "make_data_loaders" not in data:
        return f"entrypoint: {trial}"
    fields = [f"trial_class: {trial}", f"data_loaders_function: {data['make_data_loaders']}"]
    if "download_data" in data:
        fields.append(f"download_data_function: {data['download_data']}")
    return "entrypoints: {" + ", ".join(fields) + "}"
