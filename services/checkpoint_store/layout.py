"""Where a checkpoint's pieces live, by key, and how its record is serialized.

    <uuid>/data/<path>       file bytes, on the checkpoint's storage backend
    <uuid>/checkpoint.json   the record, on the store's own backend; written last, atomically:
                             its presence is what makes the checkpoint visible
    <uuid>/incomplete.json   written before any byte of an upload, removed after the record
    <uuid>/deleting.json     written before a delete starts removing anything

The markers carry the storage config, so a start-up pass can finish a delete or remove a
partial upload even when its bytes live on another backend.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from typing import Any

from google.protobuf import json_format

from pedl.v1 import common_pb2

RECORD = "checkpoint.json"
INCOMPLETE = "incomplete.json"
DELETING = "deleting.json"
FORMAT_VERSION = 1


def data_key(uuid: str, path: str) -> str:
    return f"{uuid}/data/{path}"


def marker_key(uuid: str, marker: str) -> str:
    return f"{uuid}/{marker}"


def encode_record(checkpoint: common_pb2.Checkpoint, storage: dict[str, Any]) -> bytes:
    doc = {
        "format": FORMAT_VERSION,
        "checkpoint": json_format.MessageToDict(checkpoint, preserving_proto_field_name=True),
        "storage": storage,
    }
    return json.dumps(doc, indent=1, sort_keys=True).encode()


def decode_record(data: bytes) -> tuple[common_pb2.Checkpoint, dict[str, Any]]:
    """Raises ValueError naming what is wrong with a record."""
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON: {e}") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        raise ValueError(f"unknown record format {doc.get('format') if isinstance(doc, dict) else doc!r}")
    checkpoint = common_pb2.Checkpoint()
    try:
        json_format.ParseDict(doc.get("checkpoint", {}), checkpoint)
    except json_format.ParseError as e:
        raise ValueError(f"bad checkpoint field: {e}") from e
    storage = doc.get("storage") or {}
    if not isinstance(storage, dict):
        raise ValueError("'storage' is not an object")
    return checkpoint, storage


def encode_marker(storage: dict[str, Any]) -> bytes:
    return json.dumps({"storage": storage}).encode()


def decode_marker(data: bytes) -> dict[str, Any]:
    try:
        storage = json.loads(data).get("storage") or {}
    except (json.JSONDecodeError, AttributeError) as e:
        raise ValueError(f"bad marker: {e}") from e
    if not isinstance(storage, dict):
        raise ValueError("bad marker: 'storage' is not an object")
    return storage


def is_checkpoint_name(name: str) -> bool:
    """Whether a top-level folder is a checkpoint's: named by its uuid in canonical form."""
    try:
        return str(uuidlib.UUID(name)) == name
    except ValueError:
        return False
