"""Checks a config against pedl's JSON Schema and words the first failure as pedl always has.

`jsonschema` finds what is wrong; this module turns its error into a FieldError naming the field
(so the caller can add the file and line) with pedl's one-line messages: "expected an integer, got
'ten'", "must be at least 1, got 0", "unknown field (did you mean 'metric'?)", "is required".
"""

from __future__ import annotations

import functools
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from pedl.config._checks import describe, suggestion
from pedl.config.errors import FieldError, FieldPath
from pedl.config.schema import EXPERIMENT_SCHEMA

_TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


@functools.cache
def _validator() -> Draft202012Validator:
    """The schema is a constant of pedl's, checked against the metaschema by
    tests/unit/config/test_schema.py rather than on every process's first config: that check cost
    0.26 s of CPU, more than a third of `pedl experiment create`'s start."""
    return Draft202012Validator(EXPERIMENT_SCHEMA)


def check_schema(raw: Any) -> None:
    """Raise FieldError for the first place `raw` breaks the schema (in the schema's field order)."""
    error = next(_validator().iter_errors(raw), None)
    if error is not None:
        raise to_field_error(error)


def schema_errors(raw: Any) -> list[FieldError]:
    """Every failure, worded; for tests and tools that report them all."""
    return [to_field_error(e) for e in _validator().iter_errors(raw)]


def to_field_error(error: ValidationError) -> FieldError:
    path: FieldPath = tuple(error.absolute_path)
    schema: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    value: Any = error.instance
    kind = error.validator
    expected: Any = error.validator_value
    custom = (schema.get("x-messages") or {}).get(kind)
    if custom is not None:
        keys = ", ".join(str(k) for k in value) if isinstance(value, dict) else ""
        return FieldError(path, custom.format(value=describe(value), keys=keys or "nothing"))
    if kind == "additionalProperties":
        known = list(schema.get("properties") or ())
        extra = next(k for k in value if k not in known)
        what = schema.get("x-unknown", "field")
        return FieldError((*path, extra), f"unknown {what}{suggestion(str(extra), known)}")
    if kind == "required":
        missing = next(k for k in expected if k not in value)
        return FieldError((*path, missing), (schema.get("x-required") or {}).get(missing, "is required"))
    if kind == "type":
        if "x-type" in schema:
            return FieldError(path, schema["x-type"].format(value=describe(value)))
        kinds = expected if isinstance(expected, list) else [expected]
        words = [_TYPE_WORDS[k] for k in kinds if k != "null"]
        return FieldError(path, f"expected {' or '.join(words)}, got {describe(value)}")
    if kind == "pattern":
        return FieldError(path, schema.get("x-pattern", "has the wrong form").format(value=describe(value)))
    if kind == "minimum":
        return FieldError(path, f"must be at least {expected}, got {value}")
    if kind == "maximum":
        return FieldError(path, f"must be at most {expected}, got {value}")
    if kind == "exclusiveMinimum":
        return FieldError(path, f"must be greater than {expected}, got {value}")
    if kind == "enum":
        options = [str(o) for o in expected]
        hint = suggestion(value, options) if isinstance(value, str) else ""
        return FieldError(path, f"expected one of {', '.join(options)}; got {describe(value)}{hint}")
    return FieldError(path, error.message)
