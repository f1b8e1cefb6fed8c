"""pedl's own client's `Checkpoint.add_metadata`/`remove_metadata`, without a cluster: the whole
merged metadata goes to the scheduler's SetCheckpointMetadata, and the object shows it after."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pedl.experimental._session import ClientError
from pedl.experimental.checkpoint import Checkpoint, make_checkpoint
from pedl.v1 import common_pb2


class RecordingSession:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def call(self, method: str, request: Any, what: str) -> Any:
        self.sent.append((method, request))
        return None


def _checkpoint(session: RecordingSession) -> Checkpoint:
    stored = common_pb2.Checkpoint(
        uuid="u1", experiment_id=1, trial_id=2, total_batches=10, metadata={"a": "b"}
    )
    return make_checkpoint(stored, {}, session)  # type: ignore[arg-type]


def test_add_then_remove_sends_the_whole_metadata_each_time() -> None:
    session = RecordingSession()
    checkpoint = _checkpoint(session)
    checkpoint.add_metadata({"newkey": {"n": 1}})
    assert checkpoint.metadata == {"a": "b", "newkey": {"n": 1}}
    checkpoint.remove_metadata(["a", "absent"])
    assert checkpoint.metadata == {"newkey": {"n": 1}}
    assert [(m, r.checkpoint_uuid, json.loads(r.metadata_json)) for m, r in session.sent] == [
        ("SetCheckpointMetadata", "u1", {"a": "b", "newkey": {"n": 1}}),
        ("SetCheckpointMetadata", "u1", {"newkey": {"n": 1}}),
    ]


def test_what_json_cannot_carry_is_refused_before_sending() -> None:
    session = RecordingSession()
    checkpoint = _checkpoint(session)
    with pytest.raises(ClientError, match="checkpoint metadata must be JSON"):
        checkpoint.add_metadata({"x": float("nan")})
    assert session.sent == [] and checkpoint.metadata == {"a": "b"}


def test_a_recorded_user_metadata_is_what_the_checkpoint_shows() -> None:
    stored = common_pb2.Checkpoint(uuid="u1", metadata={"a": "b"}, user_metadata_json='{"k": [1]}')
    assert make_checkpoint(stored, {}, RecordingSession()).metadata == {"k": [1]}  # type: ignore[arg-type]
