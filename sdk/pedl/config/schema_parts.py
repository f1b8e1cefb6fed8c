"""Building blocks of pedl's experiment-config JSON Schema (`pedl.config.schema`).

Plain JSON Schema (draft 2020-12) plus annotations the validator ignores and pedl's error messages use
(`pedl.config.schema_errors`):

- `x-unknown`: what an unknown key is called ("field for the grid searcher");
- `x-required`: per required key, the text after the field name ("is required for the pbt searcher");
- `x-type`: the message for a value of the wrong type (`{value}` is the value as shown to the user);
- `x-messages`: per keyword (`enum`, `minItems`, ...), the message when it fails (`{keys}`: the keys given);
- `x-pattern`: the message for a string that does not match `pattern`.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def integer(minimum: int | None = None, maximum: int | None = None) -> Schema:
    out: Schema = {"type": "integer"}
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    return out


def number(
    minimum: float | None = None, maximum: float | None = None, exclusive_minimum: float | None = None
) -> Schema:
    out: Schema = {"type": "number"}
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    if exclusive_minimum is not None:
        out["exclusiveMinimum"] = exclusive_minimum
    return out


def text(non_empty: bool = False) -> Schema:
    """A string; `non_empty` refuses one that is blank (only spaces)."""
    if non_empty:
        return {"type": "string", "pattern": r"\S", "x-pattern": "must not be empty"}
    return {"type": "string"}


BOOLEAN: Schema = {"type": "boolean"}
MAPPING: Schema = {"type": "object"}
ANY: Schema = {}


def strings() -> Schema:
    return {"type": "array", "items": text()}


def choice(*values: str) -> Schema:
    return {"enum": list(values)}


def section(
    properties: dict[str, Schema],
    *,
    required: tuple[str, ...] = (),
    unknown: str = "field",
    required_messages: dict[str, str] | None = None,
    **extra: Any,
) -> Schema:
    """A mapping with exactly these keys: an unknown one is reported first, then a missing one."""
    out: Schema = {"type": "object", "additionalProperties": False, "x-unknown": unknown}
    if required:
        out["required"] = list(required)
    if required_messages:
        out["x-required"] = required_messages
    out["properties"] = properties
    out.update(extra)
    return out


def when(key: str, value: str, then: Schema) -> Schema:
    """`then` applies where the mapping's `key` is `value` (a union told apart by one field)."""
    return {"if": {"required": [key], "properties": {key: {"const": value}}}, "then": then}


_UNITS = ("batches", "records", "epochs")


def length(minimum: int) -> Schema:
    """Determined's `{batches|records|epochs: N}`, or a bare integer (batches, or PEDL's steps)."""
    return {
        "type": ["integer", "object"],
        "x-type": "expected {{batches: N}}, {{records: N}}, {{epochs: N}} or an integer, got {value}",
        "x-messages": dict.fromkeys(
            ("minProperties", "maxProperties", "additionalProperties"),
            "expected exactly one of batches, records or epochs; got {keys}",
        ),
        "minimum": minimum,
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
        "properties": {unit: integer(minimum) for unit in _UNITS},
    }


HP_TYPES = ("const", "int", "double", "log", "categorical")


def _hp(kind: str, properties: dict[str, Schema], required: tuple[str, ...]) -> Schema:
    return when(
        "type",
        kind,
        section({"type": ANY, **properties}, required=required, unknown=f"key for a {kind} hyperparameter"),
    )


HYPERPARAMETER: Schema = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {
            "enum": list(HP_TYPES),
            "x-messages": {
                "enum": f"unknown hyperparameter type {{value}}; expected one of {', '.join(HP_TYPES)}"
            },
        }
    },
    "allOf": [
        _hp("const", {"val": ANY}, ("val",)),
        _hp("int", {"minval": integer(), "maxval": integer(), "count": integer(1)}, ("minval", "maxval")),
        _hp("double", {"minval": number(), "maxval": number(), "count": integer(1)}, ("minval", "maxval")),
        _hp(
            "log",
            {
                "minval": number(),
                "maxval": number(),
                "count": integer(1),
                "base": number(exclusive_minimum=0),
            },
            ("minval", "maxval"),
        ),
        _hp(
            "categorical",
            {
                "vals": {
                    "type": "array",
                    "minItems": 1,
                    "x-messages": {"minItems": "must list at least one value"},
                }
            },
            ("vals",),
        ),
    ],
}

# A space maps names to a hyperparameter (a mapping with `type`), a nested space (a mapping without
# one), or any other value (a const written bare).
SPACE: Schema = {
    "type": "object",
    "x-type": "expected a mapping of hyperparameter names, got {value}",
    "additionalProperties": {
        "if": {"type": "object", "required": ["type"]},
        "then": {"$ref": "#/$defs/hyperparameter"},
        "else": {"if": {"type": "object"}, "then": {"$ref": "#/$defs/space"}},
    },
}
