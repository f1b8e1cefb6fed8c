"""How workloads and their metrics look on the agent link: workload kinds, metric Structs as Python."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import struct_pb2

from pedl.sequencer import Kind, Next
from pedl.v1 import common_pb2

WORKLOAD_KINDS = {kind: common_pb2.WorkloadKind.Value(f"WORKLOAD_KIND_{kind.value}") for kind in Kind}
KIND_NAMES = {value: kind for kind, value in WORKLOAD_KINDS.items()}


def metrics_plain(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A metrics Struct as plain Python, like `pedl._metrics.from_struct` but faster and keeping NaN
    and infinities (a NaN loss is stored as reported; a searcher metric is then refused by name)."""
    out = {}
    for key, value in struct.fields.items():
        out[key] = value.number_value if value.WhichOneof("kind") == "number_value" else _plain(value)
    return out


def metrics_json(struct: struct_pb2.Struct) -> str:
    return json.dumps(metrics_plain(struct))


def _plain(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return value.number_value
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return {key: _plain(v) for key, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_plain(v) for v in value.list_value.values]
    return None


def retire(outstanding: list[Next], w: common_pb2.Workload) -> None:
    """Forgets the outstanding workload (a run's `outstanding`) that `w` answers; a stale duplicate
    answers none."""
    kind = KIND_NAMES.get(w.kind)
    for i, sent in enumerate(outstanding):
        if sent.kind is kind and sent.total_batches == w.total_batches and sent.step_id == w.step_id:
            del outstanding[i]
            return
