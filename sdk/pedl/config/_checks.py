"""Small checks left to the code (the JSON Schema checks types and bounds): each raises FieldError with
the path; `describe` and `suggestion` word values and names in messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pedl.config.errors import FieldError, FieldPath


def describe(value: Any) -> str:
    """How a wrong value is shown in an error: `'ten'`, `true`, `null`, `a list`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return repr(shown)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def expect_str(value: Any, path: FieldPath, *, non_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {describe(value)}")
    if non_empty and not value.strip():
        raise FieldError(path, "must not be empty")
    return value


def expect_bool(value: Any, path: FieldPath) -> bool:
    if not isinstance(value, bool):
        raise FieldError(path, f"expected true or false, got {describe(value)}")
    return value


def expect_mapping(value: Any, path: FieldPath) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FieldError(path, f"expected a mapping, got {describe(value)}")
    for key in value:
        if not isinstance(key, str):
            raise FieldError((*path, str(key)), f"field names must be strings, got {describe(key)}")
    return value


def expect_list(value: Any, path: FieldPath) -> list[Any]:
    if not isinstance(value, list):
        raise FieldError(path, f"expected a list, got {describe(value)}")
    return value


def suggestion(word: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_keys(
    mapping: dict[str, Any],
    path: FieldPath,
    allowed: Iterable[str],
    *,
    required: Iterable[str] = (),
    what: str = "field",
) -> None:
    """Unknown keys are errors naming the closest known one; missing required keys name themselves."""
    known = list(allowed)
    for key in mapping:
        if key not in known:
            raise FieldError((*path, key), f"unknown {what}{suggestion(key, known)}")
    for key in required:
        if key not in mapping:
            raise FieldError((*path, key), "is required")
