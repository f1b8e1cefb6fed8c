"""`SetCheckpointMetadata` on a real scheduler database: a user's metadata replaces the checkpoint's
whole, is listed with the checkpoint from then on, leaves its state alone, and is refused for
another user, an unknown or deleted checkpoint, and what is not a JSON object."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from pedl.v1 import common_pb2, scheduler_pb2
from pedl_scheduler.api import SchedulerApi
from pedl_scheduler.checkpoint_metadata import MetadataError, parse_metadata
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_server_auth import Principal
from pedl_server_auth.principal import set_current_principal

CONFIG = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: loss, max_trials: 1, max_length: {batches: 20}}
"""
ALICE, BOB, ADMIN = Principal("alice", False), Principal("bob", False), Principal("root", True)
UUID = "0b0e7a5e-6a43-4c4e-9d2c-1f0e8f9d5a11"


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code


class Context:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


Set = Callable[[Principal, str, str], Awaitable[common_pb2.Checkpoint]]


def run(
    tmp_path: Path, scenario: Callable[[ExperimentManager, SchedulerApi, int, Set], Awaitable[None]]
) -> None:
    async def main() -> None:
        manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), Cluster(), "127.0.0.1:1")
        api = SchedulerApi(manager, manager.cluster, "c")
        try:
            exp_id = manager.lifecycle.create_experiment(CONFIG, b"m", "m", owner="alice")
            (trial_id,) = [t["id"] for t in trial_ops.trials_page(manager.db, exp_id, 0, 10)]
            stored = common_pb2.Checkpoint(
                uuid=UUID, experiment_id=exp_id, trial_id=trial_id, total_batches=10, metadata={"a": "b"}
            )
            stored.files.add(path="state", size=3)
            result_ops.record_checkpoint(
                manager.db, UUID, trial_id, 1, 10, json_format.MessageToJson(stored), "2026-11-29T00:00:00Z"
            )

            async def set_metadata(who: Principal, uuid: str, text: str) -> common_pb2.Checkpoint:
                set_current_principal(who)
                request = scheduler_pb2.SetCheckpointMetadataRequest(checkpoint_uuid=uuid, metadata_json=text)
                reply = await api.SetCheckpointMetadata(request, Context())  # type: ignore[arg-type]
                return reply.checkpoint

            await scenario(manager, api, trial_id, set_metadata)
        finally:
            manager.db.close()

    asyncio.run(main())


async def _listed(api: SchedulerApi, trial_id: int) -> common_pb2.Checkpoint:
    """The checkpoint as ListTrialDetails (the REST API's listings) shows it."""
    set_current_principal(ALICE)
    request = scheduler_pb2.ListTrialDetailsRequest(experiment_id=1, after_trial_id=trial_id - 1, limit=1)
    (detail,) = (await api.ListTrialDetails(request, Context())).trials  # type: ignore[arg-type]
    (checkpoint,) = [c for c in detail.checkpoints if c.uuid == UUID]
    return checkpoint


def test_owner_and_admin_replace_the_metadata_and_listings_carry_it(tmp_path: Path) -> None:
    async def scenario(
        manager: ExperimentManager, api: SchedulerApi, trial_id: int, set_metadata: Set
    ) -> None:
        reply = await set_metadata(ALICE, UUID, json.dumps({"newkey": "newvalue", "n": [1, {"x": 2.5}]}))
        assert json.loads(reply.user_metadata_json) == {"newkey": "newvalue", "n": [1, {"x": 2.5}]}
        assert reply.state == common_pb2.CHECKPOINT_STATE_COMPLETED and reply.total_batches == 10
        listed = await _listed(api, trial_id)
        assert json.loads(listed.user_metadata_json) == {"newkey": "newvalue", "n": [1, {"x": 2.5}]}
        assert listed.state == common_pb2.CHECKPOINT_STATE_COMPLETED
        assert [f.path for f in listed.files] == ["state"] and dict(listed.metadata) == {"a": "b"}
        await set_metadata(ADMIN, UUID, "{}")  # replaced whole: the key is gone
        assert json.loads((await _listed(api, trial_id)).user_metadata_json) == {}

    run(tmp_path, scenario)


def test_another_user_unknown_and_deleted_checkpoints_are_refused(tmp_path: Path) -> None:
    async def scenario(
        manager: ExperimentManager, api: SchedulerApi, trial_id: int, set_metadata: Set
    ) -> None:
        with pytest.raises(Aborted) as refused:
            await set_metadata(BOB, UUID, '{"k": 1}')
        assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert (await _listed(api, trial_id)).user_metadata_json == ""
        with pytest.raises(Aborted) as unknown:
            await set_metadata(ALICE, "9b0e7a5e-6a43-4c4e-9d2c-1f0e8f9d5a11", "{}")
        assert unknown.value.code == grpc.StatusCode.NOT_FOUND
        with pytest.raises(Aborted) as bad:
            await set_metadata(ALICE, UUID, "[1, 2]")
        assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert str(bad.value) == "checkpoint metadata must be a JSON object, got list"
        result_ops.move_checkpoints(manager.db, [UUID], "DELETING")
        result_ops.move_checkpoints(manager.db, [UUID], "DELETED")
        with pytest.raises(Aborted) as deleted:
            await set_metadata(ALICE, UUID, "{}")
        assert deleted.value.code == grpc.StatusCode.NOT_FOUND and "(deleted)" in str(deleted.value)

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "checkpoint metadata is not JSON: Expecting value at character 0"),
        ('"a string"', "checkpoint metadata must be a JSON object, got str"),
        ('{"x": NaN}', "checkpoint metadata holds NaN, which JSON has no spelling for"),
        ('{"x": [1e999]}', "checkpoint metadata holds a number JSON cannot carry (NaN or infinite)"),
        ('{"x": "' + "y" * 70_000 + '"}', "checkpoint metadata is larger than 64 KiB"),
    ],
)
def test_bad_metadata_is_one_line(text: str, message: str) -> None:
    with pytest.raises(MetadataError) as refused:
        parse_metadata(text)
    assert str(refused.value) == message


def test_metadata_is_stored_compact_and_sorted() -> None:
    assert parse_metadata('{"b": 1,  "a": {"c": [true, null]}}') == '{"a":{"c":[true,null]},"b":1}'
