"""How a Core API call (`determined.core`'s `link.call(name, **kwargs)`) travels as CoreApiService
(protos/pedl/v1/core_api.proto): one RPC per call name, both sides read this table, so the script's
link and the harness's server cannot disagree on a name or a field.

Requests: each keyword is the field of that name; a dict goes into `<name>_json` as JSON text (so a
user's ints stay ints); `files` ([path, name] pairs) are ScriptTensorboardFile messages. Answers: a
message without fields is None, an unset optional is None, `*_json` is parsed, and an answer of two
fields (BeginCheckpoint) is a dict of them.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.message import Message

from pedl.v1 import core_api_pb2

SERVICE = core_api_pb2.DESCRIPTOR.services_by_name["CoreApiService"]
# The script's environment carries the key; each call sends it under this metadata name.
KEY_METADATA = "x-pedl-core-api-key"

# determined.core's call name -> the RPC that carries it.
RPCS = {
    "report": "ReportMetrics",
    "progress": "ReportProgress",
    "early_exit": "ExitEarly",
    "should_preempt": "ShouldPreempt",
    "acknowledge_preemption": "AcknowledgePreemption",
    "checkpoint_begin": "BeginCheckpoint",
    "checkpoint_commit": "CommitCheckpoint",
    "checkpoint_abort": "AbortCheckpoint",
    "checkpoint_upload": "StoreCheckpointDirectory",
    "checkpoint_download": "FetchCheckpoint",
    "checkpoint_metadata": "GetCheckpointMetadata",
    "checkpoint_delete": "RemoveCheckpoint",
    "next_operation": "NextOperation",
    "operation_progress": "ReportOperationProgress",
    "operation_completed": "CompleteOperation",
    "configured_units": "GetConfiguredUnits",
    "tensorboard_manual": "SetTensorboardManual",
    "tensorboard_upload": "SendTensorboardFiles",
}
CALLS = {rpc: call for call, rpc in RPCS.items()}


def message_class(name: str) -> type[Message]:
    cls: type[Message] = getattr(core_api_pb2, name)
    return cls


def request_class(rpc: str) -> type[Message]:
    return message_class(SERVICE.methods_by_name[rpc].input_type.name)


def response_class(rpc: str) -> type[Message]:
    return message_class(SERVICE.methods_by_name[rpc].output_type.name)


def encode_request(rpc: str, kwargs: dict[str, Any]) -> Message:
    request = request_class(rpc)()
    for key, value in kwargs.items():
        if key == "files":
            files = [core_api_pb2.ScriptTensorboardFile(path=p, name=n) for p, n in value]
            request.files.extend(files)  # type: ignore[attr-defined]
        elif f"{key}_json" in request.DESCRIPTOR.fields_by_name:
            setattr(request, f"{key}_json", json.dumps(value))
        else:
            setattr(request, key, value)
    return request


def decode_request(request: Message) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for field in request.DESCRIPTOR.fields:
        value = getattr(request, field.name)
        if field.name == "files":
            kwargs["files"] = [[f.path, f.name] for f in value]
        elif field.name.endswith("_json"):
            kwargs[field.name.removesuffix("_json")] = json.loads(value) if value else {}
        else:
            kwargs[field.name] = value
    return kwargs


def encode_response(rpc: str, value: Any) -> Message:
    response = response_class(rpc)()
    fields = response.DESCRIPTOR.fields
    if not fields or value is None:
        return response
    if len(fields) > 1:
        for field in fields:
            setattr(response, field.name, value[field.name])
        return response
    (field,) = fields
    setattr(response, field.name, json.dumps(value) if field.name.endswith("_json") else value)
    return response


def decode_response(response: Message) -> Any:
    fields = response.DESCRIPTOR.fields
    if not fields:
        return None
    if len(fields) > 1:
        return {field.name: getattr(response, field.name) for field in fields}
    (field,) = fields
    if field.has_presence and not response.HasField(field.name):
        return None
    value = getattr(response, field.name)
    return json.loads(value) if field.name.endswith("_json") else value
