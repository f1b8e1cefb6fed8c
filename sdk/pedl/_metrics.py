"""Metric values between Python and protobuf Structs.

Metrics may be non-scalar tensors (seed 002); they travel as nested lists of floats.
"""

from __future__ import annotations

import math
import re
from typing import Any

from google.protobuf import struct_pb2

# Determined's metric groups besides training and validation (Core API `report_metrics(group=...)`;
# its own tests use names such as "inf%er en/ce"): a name is the first part of its metric ids
# ("abc.loss"), so it holds no dot, and no control character.
BUILTIN_GROUPS = ("training", "validation")
GROUP_NAME = re.compile(r"[^.\x00-\x1f\x7f]{1,64}")


def check_group(name: str) -> str:
    """The group's name, or ValueError with the one line saying what a group's name may hold."""
    if name not in BUILTIN_GROUPS and not GROUP_NAME.fullmatch(name):
        raise ValueError(f"a metric group is 1-64 characters, no dot or control character, not {name[:64]!r}")
    return name


def to_plain(value: Any) -> Any:
    """A JSON-compatible copy: tensors and arrays become (nested lists of) floats."""
    if hasattr(value, "detach"):  # torch.Tensor, without importing torch
        value = value.detach().cpu().numpy()
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple, dict)):
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    raise TypeError(f"metric value of type {type(value).__name__} cannot be reported")


def to_struct(values: dict[str, Any] | None) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    if values:
        struct.update(to_plain(values))
    return struct


def from_struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A metrics Struct as plain Python, NaN and infinities kept as floats (Determined stores them;
    protobuf's `MessageToDict` refuses them), and faster than it: a trial's 100,000 rows pass here."""
    out = {}
    for key, value in struct.fields.items():
        out[key] = value.number_value if value.WhichOneof("kind") == "number_value" else _from_value(value)
    return out


def _from_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return value.number_value
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return {key: _from_value(v) for key, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_from_value(v) for v in value.list_value.values]
    return None


def is_finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(is_finite(v) for v in value)
    return True
