"""Applies fields.FIELDS to a config: nulls mean unset, refused fields fail, container-only ones warn.

Runs before the sections are validated, so a refused field is reported as refused (with what to use
instead) rather than as a type error in a section pedl would not use anyway.
"""

from __future__ import annotations

from typing import Any

from pedl.config.errors import FieldError, FieldPath, format_path
from pedl.config.fields import FIELDS, OPAQUE, Field


def drop_nulls(value: dict[str, Any], path: FieldPath = ()) -> dict[str, Any]:
    """Explicit `null` means "unset" (Determined prints every unset field as null) for every field
    in FIELDS; an unknown key stays, even when null, so its validator can name it."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        dotted = ".".join(str(p) for p in (*path, key))
        if item is None and dotted in FIELDS:
            continue
        if isinstance(item, dict) and dotted in FIELDS and dotted not in OPAQUE:
            item = drop_nulls(item, (*path, key))
        out[key] = item
    return out


def _is_inert(field: Field, value: Any) -> bool:
    return any(value == inert and type(value) is type(inert) for inert in field.inert)


def apply_field_policy(raw: dict[str, Any]) -> list[str]:
    """Raise FieldError for the first refused field that is set; return warnings for the others."""
    warnings: list[str] = []
    _walk(raw, (), warnings)
    return warnings


def _walk(mapping: dict[str, Any], path: FieldPath, warnings: list[str]) -> None:
    for key, value in mapping.items():
        child = (*path, key)
        dotted = ".".join(str(p) for p in child)
        field = FIELDS.get(dotted)
        if field is None:
            continue  # unknown keys are reported (with a suggestion) by the section validators
        if isinstance(value, str) and isinstance(key, str):
            by_value = FIELDS.get(f"{dotted}={value}")
            if by_value is not None and by_value.status != "supported":
                _act(child, by_value, value, warnings, shown=f"{value!r}")
                continue
        if field.status != "supported" and not _is_inert(field, value):
            _act(child, field, value, warnings)
            continue
        if isinstance(value, dict) and dotted not in OPAQUE:
            _walk(value, child, warnings)


def _act(path: FieldPath, field: Field, value: Any, warnings: list[str], shown: str = "") -> None:
    what = f"{shown} " if shown else ""
    if field.status == "refused":
        raise FieldError(path, f"{what}is not supported by pedl: {field.note}")
    warnings.append(f"{format_path(path)}: {what}has no effect in pedl: {field.note}")
