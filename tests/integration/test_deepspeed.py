"""Determined's DeepSpeedTrial on 2 slots of a real cluster, DeepSpeed's CPU accelerator over gloo:
trains, validates and checkpoints with ZeRO stage 1 (each rank's optimizer partition)."""

from __future__ import annotations

import pytest
from test_cluster import logs, stub, submit, wait

from pedl._metrics import from_struct
from pedl.v1 import common_pb2, scheduler_pb2
from support.deepspeed_models import config, deepspeed_python, write_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    python, why = deepspeed_python()
    if python is None:
        pytest.skip(f"no DeepSpeed environment: {why}")
    with local_cluster(
        tmp_path_factory.mktemp("cluster"), agents=1, slots=2, agent_args=["--python", python]
    ) as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


def _train(cluster, model, **options) -> scheduler_pb2.GetTrialResponse:
    exp_id = submit(cluster, model, config(**options))
    result = wait(cluster, exp_id, timeout=540)
    (trial,) = result.trials
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, logs(cluster, trial.id)
    return stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))


# Each harness imports DeepSpeed (half a minute on a loaded 2-core machine) before its first step.
@pytest.mark.timeout(600)
def test_a_deepspeed_trial_trains_two_slots_with_zero_and_checkpoints(cluster, tmp_path) -> None:
    detail = _train(cluster, write_model(tmp_path / "ds"), batches=8, zero_stage=1)
    assert [s.total_batches for s in detail.steps] == [4, 8]
    assert all("loss" in from_struct(s.metrics) for s in detail.steps)
    assert [v.total_batches for v in detail.validations] == [4, 8]
    assert {"validation_loss", "accuracy"} <= set(from_struct(detail.validations[-1].metrics))
    text = logs(cluster, detail.trial.id)
    assert "[rank 0] " in text and "[rank 1] " in text
    assert detail.checkpoints and detail.checkpoints[-1].total_batches == 8
