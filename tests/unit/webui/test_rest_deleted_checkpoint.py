"""Determined's `GET /api/v1/checkpoints/{uuid}` for a checkpoint the store no longer holds: the
scheduler's record of it, in state STATE_DELETED, with its trial and validation (Determined's
test_delete_checkpoints polls it until it reads so); a uuid never recorded stays a 404."""

from __future__ import annotations

from typing import Any

import pytest

from pedl._metrics import to_struct
from pedl.config import carried
from pedl.config.experiment import parse_experiment_config
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import Caller
from pedl_webui.rest.trials import recorded_checkpoint

UUID = "0b0e7a5e-6a43-4c4e-9d2c-1f0e8f9d5a11"
CONFIG = "searcher: {name: single, metric: loss, max_length: {batches: 30}}\nhyperparameters: {lr: 0.1}\n"


class _Scheduler:
    """Trial 7 of experiment 3 took UUID at 10 batches (deleted since) and validated there; its
    steps come in two pages, the checkpoint in the second."""

    def call(self, token: str, method: str, message: Any) -> Any:
        if method == "GetExperiment":
            exp = scheduler_pb2.Experiment(
                id=3,
                config_document=carried.masked_json(parse_experiment_config(CONFIG)),
                searcher_metric="loss",
            )
            return scheduler_pb2.GetExperimentResponse(experiment=exp)
        assert method == "GetTrial"
        trial = scheduler_pb2.Trial(id=7, experiment_id=3, hparams=to_struct({"lr": 0.1}))
        if message.checkpoint_uuid:
            if message.checkpoint_uuid != UUID:
                raise GatewayError(404, f"checkpoint {message.checkpoint_uuid!r} not found")
            return scheduler_pb2.GetTrialResponse(trial=trial)
        assert message.trial_id == 7 and message.include_deleted_checkpoints
        if not message.page_token:
            return scheduler_pb2.GetTrialResponse(trial=trial, next_page_token="p2")
        deleted = common_pb2.Checkpoint(
            uuid=UUID,
            trial_id=7,
            experiment_id=3,
            total_batches=10,
            state=common_pb2.CHECKPOINT_STATE_DELETED,
        )
        validation = scheduler_pb2.Validation(total_batches=10, metrics=to_struct({"loss": 0.25}))
        return scheduler_pb2.GetTrialResponse(trial=trial, checkpoints=[deleted], validations=[validation])


def test_a_deleted_checkpoint_reads_as_its_record_in_state_deleted() -> None:
    checkpoint = recorded_checkpoint(Caller(_Scheduler(), "tok"), UUID)  # type: ignore[arg-type]
    assert checkpoint["uuid"] == UUID and checkpoint["state"] == "STATE_DELETED"
    assert checkpoint["training"]["trialId"] == 7 and checkpoint["training"]["experimentId"] == 3
    assert checkpoint["training"]["searcherMetric"] == 0.25
    assert checkpoint["metadata"]["steps_completed"] == 10


def test_a_checkpoint_never_recorded_is_a_404() -> None:
    with pytest.raises(GatewayError) as unknown:
        recorded_checkpoint(Caller(_Scheduler(), "tok"), "9b0e7a5e-6a43-4c4e-9d2c-1f0e8f9d5a11")  # type: ignore[arg-type]
    assert unknown.value.status == 404
