"""Whether a Trial entrypoint's name can be found in its module, read with `ast` (no user code runs).

`entrypoint: model_def:MyTrial` is resolved on the agent by importing `model_def` and taking
`MyTrial`; when the module plainly defines no such name, or defines it only as a function, every
trial run fails the same way. This says so at `pedl experiment create` instead. It refuses only what
the source makes certain: a name that may come from a star import, an import, an assignment, a
loop, `globals()`/`setattr`/`exec`, a module `__getattr__` or a decorated function is left to the
agent, which reports it when it imports the module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

# Calls through which a module can gain names the source does not spell out.
_DYNAMIC_CALLS = {"globals", "vars", "setattr", "exec", "eval", "__import__", "import_module"}
# `try`, and Python 3.11's `try ... except*` where it exists.
_TRY: tuple[type[ast.Try], ...] = (ast.Try, getattr(ast, "TryStar", ast.Try))


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run at import, also those inside `if`, `try`, `with` and loops (not in defs)."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
            yield from _module_level(node.body)
            yield from _module_level(getattr(node, "orelse", []))
        elif isinstance(node, _TRY):
            yield from _module_level(node.body)
            for handler in node.handlers:
                yield from _module_level(handler.body)
            yield from _module_level(node.orelse)
            yield from _module_level(node.finalbody)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _module_level(case.body)


def _is_dynamic(tree: ast.Module) -> bool:
    """True when names may be added at run time in ways the source does not spell out."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in _DYNAMIC_CALLS:
                return True
        if isinstance(node, ast.Attribute) and node.attr in ("modules", "__dict__"):
            return True  # sys.modules[__name__].X = ..., module.__dict__[...]
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__getattr__"
        for node in _module_level(tree.body)
    )


def _bindings(tree: ast.Module, name: str) -> list[ast.stmt | None]:
    """Every module-level statement that binds `name`; None for a binding of unknown kind."""
    found: list[ast.stmt | None] = []
    for node in _module_level(tree.body):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name == name:
                found.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound == name:
                    found.append(None)
        else:
            # Assignments, loop and `with` targets, walrus, deletes...: any Name stored there.
            # (Only an `if`'s or `while`'s test: their bodies come as statements of their own.)
            part = node.test if isinstance(node, (ast.If, ast.While)) else node
            found += [
                None
                for sub in ast.walk(part)
                if isinstance(sub, ast.Name) and sub.id == name and not isinstance(sub.ctx, ast.Load)
            ]
    return found


def entrypoint_refusal(
    tree: ast.Module, object_ref: str, module_file: str, submodules: set[str]
) -> str | None:
    """The reason `object_ref` (e.g. `MyTrial`) cannot be a Trial class of the module parsed as
    `tree`, or None when it is one or the source cannot tell. `submodules` are the names of modules
    inside the package (an `__init__.py`'s `pkg.sub` is an attribute once imported)."""
    name = object_ref.split(".", 1)[0]
    if name in submodules or _is_dynamic(tree):
        return None
    bindings = _bindings(tree, name)
    if not bindings:
        classes = sorted({n.name for n in _module_level(tree.body) if isinstance(n, ast.ClassDef)})
        listed = ", ".join(classes) if classes else "none"
        return f"{module_file} defines no {name!r} (its classes: {listed})"
    if "." in object_ref:
        return None
    functions = [b for b in bindings if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(functions) == len(bindings) and not any(f.decorator_list for f in functions):
        line = functions[-1].lineno
        return f"{name!r} in {module_file}, line {line}, is a function, not a Trial class"
    return None
