"""How workloads and their metrics look on the agent link: workload kinds, metric Structs as Python."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import struct_pb2

from pedl._metrics import from_struct
from pedl.sequencer import Kind, Next
from pedl.v1 import common_pb2

WORKLOAD_KINDS = {kind: common_pb2.WorkloadKind.Value(f"WORKLOAD_KIND_{kind.value}") for kind in Kind}
KIND_NAMES = {value: kind for kind, value in WORKLOAD_KINDS.items()}


def metrics_plain(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A metrics Struct as plain Python, keeping NaN and infinities (stored as reported)."""
    return from_struct(struct)


def metrics_json(struct: struct_pb2.Struct) -> str:
    return json.dumps(metrics_plain(struct))


def retire(outstanding: list[Next], w: common_pb2.Workload) -> None:
    """Forgets the outstanding workload (a run's `outstanding`) that `w` answers; a stale duplicate
    answers none."""
    kind = KIND_NAMES.get(w.kind)
    for i, sent in enumerate(outstanding):
        if sent.kind is kind and sent.total_batches == w.total_batches and sent.step_id == w.step_id:
            del outstanding[i]
            return
