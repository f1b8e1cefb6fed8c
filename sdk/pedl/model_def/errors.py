"""Errors in user model definitions, located by file and line so users can fix them quickly."""

from __future__ import annotations

import inspect
import traceback
from pathlib import Path
from typing import Any


class ModelDefinitionError(Exception):
    """The model definition cannot be used as it is; the message says where and why."""


def _relative(path: str | Path, root: Path | None) -> str:
    p = Path(path)
    if root is not None:
        try:
            return str(p.resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return str(p)


def describe(obj: Any, root: Path | None = None) -> str:
    """`Name (file.py:12)` for a class or function, for error messages."""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    try:
        file = inspect.getsourcefile(obj)
        _, line = inspect.getsourcelines(obj)
    except (TypeError, OSError):
        return name
    if file is None:
        return name
    return f"{name} ({_relative(file, root)}:{line})"


def user_code_location(exc: BaseException, root: Path) -> str | None:
    """`file.py:line` of the innermost traceback frame inside `root` (or a SyntaxError's own)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{_relative(exc.filename, root)}:{exc.lineno}"
    root_resolved = root.resolve()
    location = None
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            Path(frame.filename).resolve().relative_to(root_resolved)
        except ValueError:
            continue
        location = f"{_relative(frame.filename, root)}:{frame.lineno}"
    return location


def from_user_exception(what: str, exc: BaseException, root: Path) -> ModelDefinitionError:
    """A ModelDefinitionError for an exception raised while running user code."""
    location = user_code_location(exc, root)
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):
        detail = f"SyntaxError: {exc.msg}"
        if exc.text:
            detail += f"\n    {exc.text.rstrip()}"
    where = f"{location}: " if location else ""
    return ModelDefinitionError(f"{where}{what} failed: {detail}")
