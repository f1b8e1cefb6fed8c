"""Determined's PostCheckpointMetadata and CheckpointsRemoveFiles bodies as pedl reads them, without a
scheduler: what is sent on, what is refused with one 400 line, and the metadata a checkpoint then
shows Determined's client."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pedl.v1 import common_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.shapes import checkpoint_metadata
from pedl_webui.rest.trials import metadata_request, remove_request

UUID = "0b0e7a5e-6a43-4c4e-9d2c-1f0e8f9d5a11"
# As Determined 0.38.1's SDK sends it (`Checkpoint.add_metadata`: the merged metadata, the rest empty).
SENT = {
    "checkpoint": {
        "uuid": UUID,
        "metadata": {"steps_completed": 30, "newkey": "newvalue"},
        "resources": {},
        "training": {},
        "state": "STATE_UNSPECIFIED",
    }
}


def test_determined_sdks_body_becomes_the_schedulers_request() -> None:
    message = metadata_request(UUID, SENT)
    assert message.checkpoint_uuid == UUID
    assert json.loads(message.metadata_json) == {"steps_completed": 30, "newkey": "newvalue"}
    nulls = {"checkpoint": {**SENT["checkpoint"], "taskId": None, "reportTime": None, "storageId": None}}
    assert metadata_request(UUID, nulls).checkpoint_uuid == UUID


def _with(**fields: Any) -> dict[str, Any]:
    return {"checkpoint": {**SENT["checkpoint"], **fields}}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1], "the request body must be a JSON object"),
        ({"checkpoint": "x"}, 'field "checkpoint" must be an object'),
        ({"checkpoint": {}, "extra": 1}, 'unknown field "extra" in the request body'),
        (_with(metadata=None), 'give "checkpoint": {"metadata": {...}}, a JSON object'),
        (_with(metadata=[1]), 'field "metadata" must be an object'),
        (_with(other=1), 'unknown field "other" in the body\'s "checkpoint"'),
        (_with(uuid="1b0e7a5e-6a43-4c4e-9d2c-1f0e8f9d5a11"), "is not the path's"),
    ],
)
def test_bad_bodies_are_one_400_line(value: Any, message: str) -> None:
    with pytest.raises(GatewayError) as refused:
        metadata_request(UUID, value)
    assert refused.value.status == 400
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_checkpoint_shows_the_users_metadata_once_set() -> None:
    checkpoint = common_pb2.Checkpoint(uuid=UUID, total_batches=30, metadata={"a": "b"})
    assert checkpoint_metadata(checkpoint) == {"a": "b", "steps_completed": 30, "framework": "", "format": ""}
    checkpoint.user_metadata_json = '{"newkey":"newvalue"}'
    assert checkpoint_metadata(checkpoint) == {"newkey": "newvalue"}


def test_determined_sdks_remove_files_body_becomes_the_schedulers_request() -> None:
    message = remove_request({"checkpointUuids": [UUID], "checkpointGlobs": ["state", "**/*.pt"]})
    assert (list(message.checkpoint_uuids), list(message.globs)) == ([UUID], ["state", "**/*.pt"])
    assert list(remove_request({"checkpointUuids": [UUID], "checkpointGlobs": []}).globs) == []  # refresh


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"checkpointGlobs": ["x"]}, 'give "checkpointUuids"'),
        ({"checkpointUuids": [1], "checkpointGlobs": ["x"]}, 'give "checkpointUuids"'),
        ({"checkpointUuids": [UUID], "checkpointGlobs": [3]}, '"checkpointGlobs" must be a list of strings'),
        ({"checkpointUuids": [UUID], "globs": ["x"]}, 'unknown field "globs"'),
    ],
)
def test_bad_remove_files_bodies_are_one_400_line(value: Any, message: str) -> None:
    with pytest.raises(GatewayError) as refused:
        remove_request(value)
    assert refused.value.status == 400 and message in str(refused.value)
