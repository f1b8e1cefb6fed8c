"""Metric values between Python and protobuf Structs.

Metrics may be non-scalar tensors (seed 002); they travel as nested lists of floats.
"""

from __future__ import annotations

import math
from typing import Any

from google.protobuf import struct_pb2


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
    # Imported here: json_format is a tenth of the CLI's start for commands that never show metrics.
    from google.protobuf import json_format

    return json_format.MessageToDict(struct)


def is_finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(is_finite(v) for v in value)
    return True
