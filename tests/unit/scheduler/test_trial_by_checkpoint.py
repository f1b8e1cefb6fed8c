"""`GetTrial` by `checkpoint_uuid` on a real scheduler database: the trial that took a checkpoint is
found while the checkpoint is live and after it is deleted, so the REST API answers Determined's
`GET /api/v1/checkpoints/{uuid}` for a deleted checkpoint with its record in state DELETED."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from pedl.v1 import common_pb2, scheduler_pb2
from pedl_scheduler.api import SchedulerApi
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage.ops import results as result_ops
from pedl_server_auth.principal import set_current_principal
from tests.unit.scheduler.test_checkpoint_metadata import ALICE, UUID, Aborted, Context, Set, run


async def _get(api: SchedulerApi, **fields: object) -> scheduler_pb2.GetTrialResponse:
    set_current_principal(ALICE)
    request = scheduler_pb2.GetTrialRequest(**fields)  # type: ignore[arg-type]
    return await api.GetTrial(request, Context())  # type: ignore[arg-type]


def test_a_checkpoints_trial_is_found_with_the_record_after_deletion(tmp_path: Path) -> None:
    async def scenario(manager: ExperimentManager, api: SchedulerApi, trial_id: int, _: Set) -> None:
        live = await _get(api, checkpoint_uuid=UUID)
        assert live.trial.id == trial_id and [c.uuid for c in live.checkpoints] == [UUID]
        result_ops.move_checkpoints(manager.db, [UUID], "DELETING")
        result_ops.move_checkpoints(manager.db, [UUID], "DELETED")
        hidden = await _get(api, checkpoint_uuid=UUID)
        assert hidden.trial.id == trial_id and list(hidden.checkpoints) == []
        kept = await _get(api, checkpoint_uuid=UUID, include_deleted_checkpoints=True)
        (record,) = kept.checkpoints
        assert record.uuid == UUID and record.state == common_pb2.CHECKPOINT_STATE_DELETED
        assert record.total_batches == 10 and record.trial_id == trial_id

    run(tmp_path, scenario)


def test_an_unknown_checkpoint_is_not_found_and_both_ids_are_refused(tmp_path: Path) -> None:
    async def scenario(manager: ExperimentManager, api: SchedulerApi, trial_id: int, _: Set) -> None:
        with pytest.raises(Aborted) as unknown:
            await _get(api, checkpoint_uuid="9b0e7a5e-6a43-4c4e-9d2c-1f0e8f9d5a11")
        assert unknown.value.code == grpc.StatusCode.NOT_FOUND and "not found" in str(unknown.value)
        with pytest.raises(Aborted) as both:
            await _get(api, checkpoint_uuid=UUID, trial_id=trial_id)
        assert both.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert (await _get(api, trial_id=trial_id)).trial.id == trial_id  # by id as before

    run(tmp_path, scenario)
