"""Checks a model definition before it is submitted, without importing it.

The submitting machine may not have the model's frameworks installed, so this reads the
source with `ast`: it catches syntax errors, a missing entrypoint module and a context with no
Trial subclass at all, which would otherwise surface only once a trial starts on the cluster.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pedl.model_def._importing import package_name
from pedl.model_def.entrypoint_names import entrypoint_refusal
from pedl.model_def.errors import ModelDefinitionError

if TYPE_CHECKING:
    from pedl.config.entrypoint import Entrypoint

TRIAL_BASES = {"Trial", "PyTorchTrial", "TensorFlowTrial", "EstimatorTrial", "KerasTrial", "DeepSpeedTrial"}
# Trial interfaces of PEDL and Determined releases that pedl does not run, refused before submission.
UNSUPPORTED_BASES = {
    "TensorpackTrial": "PEDL's Tensorpack interface",
    "PyTorchLightningAdapter": "Determined's PyTorch Lightning adapter",
}

# Modules of Determined that pedl does not provide, refused before submission with the reason.
UNSUPPORTED_MODULES: dict[str, str] = {}


def _imported_modules(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return []


def _refuse_unsupported_import(node: ast.AST, rel: Path) -> None:
    for module in _imported_modules(node):
        for refused, why in UNSUPPORTED_MODULES.items():
            if module == refused or module.startswith(refused + "."):
                line = getattr(node, "lineno", "?")
                raise ModelDefinitionError(f"{rel}, line {line}: imports {module} ({why}")


def _refuse_unsupported(trees: dict[Path, ast.Module], root: Path) -> None:
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                _refuse_unsupported_import(
                    node, path.relative_to(root) if path.is_relative_to(root) else path
                )
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                name = _base_name(base)
                if name in UNSUPPORTED_BASES:
                    rel = path.relative_to(root) if path.is_relative_to(root) else path
                    raise ModelDefinitionError(
                        f"{rel}, line {node.lineno}: class {node.name} derives from {name} "
                        f"({UNSUPPORTED_BASES[name]}), which pedl does not support"
                    )


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _parse(path: Path, root: Path) -> ast.Module:
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as e:
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        raise ModelDefinitionError(f"{rel}, line {e.lineno}: syntax error: {e.msg}") from None


def _entrypoint_spec(entrypoint: str | dict[str, Any] | list[str]) -> Entrypoint | None:
    """The parsed entrypoint (None for none); a bad one is a ModelDefinitionError."""
    from pedl.config.entrypoint import parse_entrypoint
    from pedl.config.errors import FieldError

    try:
        return parse_entrypoint(entrypoint)
    except FieldError as e:
        raise ModelDefinitionError(str(e)) from None


def _script_entrypoint(entrypoint: str | dict[str, Any] | list[str] | None) -> str | None:
    """The script of a Simple Model Definition entrypoint (`train.py`, `{script: train.py}`), else None."""
    if entrypoint is None:
        return None
    spec = _entrypoint_spec(entrypoint)
    return spec.script if spec is not None and spec.kind == "script" else None


def _trial_entrypoint(entrypoint: str | dict[str, Any] | list[str] | None) -> str | None:
    """'module:Class' for a Trial-class entrypoint, also one a Determined launcher wraps (`--trial`)."""
    if entrypoint is None or isinstance(entrypoint, dict):
        return None
    spec = _entrypoint_spec(entrypoint)
    return str(spec) if spec is not None and spec.kind == "trial" else None


def _command_script(entrypoint: str | dict[str, Any] | list[str] | None) -> str | None:
    """For a command entrypoint, the first `.py` file it names in the context ("" if none); else None."""
    if entrypoint is None or isinstance(entrypoint, dict):
        return None
    spec = _entrypoint_spec(entrypoint)
    if spec is None or spec.kind != "command":
        return None
    return next((arg for arg in spec.command if arg.endswith(".py") and not arg.startswith("/")), "")


def _check_script(path: Path, root: Path, script: str, files: list[str] | None) -> None:
    """A script context needs no Trial subclass, only the script itself."""
    wanted = Path(script)
    if path.is_file():
        present = wanted == Path(path.name)
    elif files is not None:
        present = wanted in {Path(f) for f in files}
    else:
        present = (root / wanted).is_file()
    if not present:
        top = ", ".join(sorted(p.name for p in root.glob("*.py"))) or "none"
        packed = " as packed (is it left out by .pedlignore?)" if files is not None else ""
        raise ModelDefinitionError(
            f"entrypoint script {script!r} is not in the model definition {path}{packed}; "
            f"its top-level Python files: {top}"
        )


def _check_entrypoint_name(root: Path, trees: dict[Path, ast.Module], entrypoint: str) -> None:
    """Refuses an entrypoint whose module plainly defines no such name, or only a function."""
    module, _, object_ref = entrypoint.partition(":")
    parts = module.split(".") if module else []
    candidates = [root.joinpath(*parts).with_suffix(".py")] if parts else []
    candidates.append(root.joinpath(*parts, "__init__.py"))
    source = next((c for c in candidates if c.is_file()), None)
    if source is None:
        return
    tree = trees.get(source) or _parse(source, root)
    package = source.parent if source.name == "__init__.py" else None
    submodules = {p.stem for p in package.iterdir() if p.suffix == ".py" or p.is_dir()} if package else set()
    reason = entrypoint_refusal(tree, object_ref, str(source.relative_to(root)), submodules)
    if reason is not None:
        raise ModelDefinitionError(f"entrypoint {entrypoint!r}: {reason}")


def check_model_definition(
    path: Path, entrypoint: str | dict[str, Any] | list[str] | None, files: list[str] | None = None
) -> None:
    """Raises ModelDefinitionError naming the file (and line) when the definition cannot work.

    `entrypoint` is the config's raw field; `files` are the context's files as packed (relative
    paths); by default every .py under `path`.
    """
    root = path if path.is_dir() else path.parent
    sources = (
        [root / f for f in files if f.endswith(".py")]
        if files is not None
        else ([path] if path.is_file() else sorted(root.rglob("*.py")))
    )
    trees = {p: _parse(p, root) for p in sources}
    command = _command_script(entrypoint)
    if command is not None:  # a Core API script: it needs no Trial subclass, only to be there
        if command and not (root / command).is_file():
            raise ModelDefinitionError(f"entrypoint {entrypoint!r} runs {command}, which is not in {root}")
        return
    _refuse_unsupported(trees, root)
    script = _script_entrypoint(entrypoint)
    if script is not None:
        _check_script(path, root, script, files)
        return
    entrypoint = _trial_entrypoint(entrypoint)
    name = package_name(root)
    if path.is_dir() and name in sys.stdlib_module_names:
        raise ModelDefinitionError(
            f"the model definition directory is named {root.name!r}, which would import as the standard "
            f"library module {name!r}; rename the directory"
        )
    if entrypoint and ":" in entrypoint and path.is_dir():
        module = entrypoint.split(":", 1)[0]
        if module:
            parts = module.split(".")
            candidates = [root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")]
            if not any(c.exists() for c in candidates):
                raise ModelDefinitionError(
                    f"entrypoint {entrypoint!r}: module {module!r} not found in {path} "
                    f"(looked for {candidates[0].relative_to(root)} and {candidates[1].relative_to(root)})"
                )
        _check_entrypoint_name(root, trees, entrypoint)
    if path.is_dir() and not (root / "__init__.py").exists() and not entrypoint:
        top = sorted(p.name for p in root.glob("*.py"))
        if len(top) != 1:
            raise ModelDefinitionError(
                f"{path} has no __init__.py and {len(top)} Python files at its top level "
                f"({', '.join(top) or 'none'}); add an __init__.py exposing the Trial class and "
                "make_data_loaders, or set entrypoint: '<module>:<TrialClass>' in the config"
            )
    found = [
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(_base_name(b) in TRIAL_BASES or _base_name(b).endswith("Trial") for b in node.bases)
    ]
    if not found:
        raise ModelDefinitionError(
            f"no Trial subclass found in {path} ({len(trees)} Python files): a model definition needs a "
            "class deriving from pedl.pytorch.PyTorchTrial (or another pedl Trial)"
        )
