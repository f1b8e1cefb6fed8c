"""The three real processes (checkpoint store, scheduler, agent) training real experiments."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pedl import _grpc
from pedl._metrics import from_struct
from pedl.checkpoints import CheckpointStoreClient
from pedl.context import pack
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

TERMINAL = {
    common_pb2.EXPERIMENT_STATE_COMPLETED,
    common_pb2.EXPERIMENT_STATE_ERROR,
    common_pb2.EXPERIMENT_STATE_CANCELED,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for the module (a start costs ~10 s on a loaded machine): each test submits and
    reads only its own experiments, and the failing assertions carry the cluster's logs."""
    with local_cluster(tmp_path_factory.mktemp("cluster")) as c:
        yield c


def stub(cluster) -> scheduler_pb2_grpc.SchedulerServiceStub:
    return scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))


def submit(cluster, model_dir: Path, config: str) -> int:
    packed = pack(model_dir)
    response = stub(cluster).CreateExperiment(
        scheduler_pb2.CreateExperimentRequest(
            config_yaml=config, model_definition=packed.data, model_definition_name=packed.name
        ),
        timeout=30,
    )
    return response.experiment.id


def wait(cluster, exp_id: int, timeout: float = 300) -> scheduler_pb2.GetExperimentResponse:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))
        if response.experiment.state in TERMINAL:
            return response
        time.sleep(0.2)
    raise AssertionError(f"experiment {exp_id} did not end:\n{cluster.logs()}")


def logs(cluster, trial_id: int) -> str:
    chunks = stub(cluster).GetTrialLogs(scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id))
    return "\n".join(line.message for chunk in chunks for line in chunk.lines)


def test_an_experiment_trains_validates_checkpoints_and_completes(cluster, tmp_path) -> None:
    exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), tiny_config(max_batches=40))
    result = wait(cluster, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (trial,) = result.trials
    assert trial.state == common_pb2.TRIAL_STATE_COMPLETED
    assert trial.total_batches == 40
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    assert [s.total_batches for s in detail.steps] == [10, 20, 30, 40]
    assert all(
        "loss" in from_struct(s.metrics) and "accuracy" in from_struct(s.metrics) for s in detail.steps
    )
    assert [v.total_batches for v in detail.validations] == [20, 40]
    assert "error" in from_struct(detail.validations[-1].metrics)
    assert detail.checkpoints and detail.checkpoints[-1].total_batches == 40
    with CheckpointStoreClient(cluster.store.address) as store:
        stored = store.get(detail.checkpoints[-1].uuid)
        assert stored.trial_id == trial.id and stored.files


def test_user_code_that_raises_errors_the_trial_with_its_traceback(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "broken", build_model_body="raise ValueError('bad layer size')")
    exp_id = submit(cluster, model, tiny_config(extra="max_restarts: 1\n"))
    result = wait(cluster, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR, cluster.logs()
    (trial,) = result.trials
    assert trial.state == common_pb2.TRIAL_STATE_ERROR
    assert trial.restarts == 1 and "max_restarts is 1" in trial.error
    # The experiment names the first failing trial's cause (describe, --json and the web UI show it).
    first_line = trial.error.strip().splitlines()[0]
    assert result.experiment.error == f"every trial failed; the first, trial {trial.id}: {first_line}"
    text = logs(cluster, trial.id)
    assert "Traceback" in text and "ValueError: bad layer size" in text and "__init__.py" in text
    assert "restarting trial" in text
    # The services keep serving: a good experiment still completes.
    good = submit(cluster, write_tiny_model(tmp_path / "good"), tiny_config(max_batches=10))
    assert wait(cluster, good).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()


def wait_for_steps(cluster, exp_id: int, steps: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        trials = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
        if trials and trials[0].num_steps >= steps:
            return
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.05)


def test_a_killed_experiment_is_canceled(cluster, tmp_path) -> None:
    exp_id = submit(
        cluster, write_tiny_model(tmp_path / "long"), tiny_config(max_batches=10**7, batches_per_step=100)
    )
    wait_for_steps(cluster, exp_id, 1)
    stub(cluster).KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id))
    result = wait(cluster, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_CANCELED, cluster.logs()
    assert result.trials[0].state == common_pb2.TRIAL_STATE_CANCELED


def test_python_create_submits_to_the_cluster_named_by_pedl_master(cluster, tmp_path, monkeypatch) -> None:
    import pedl.experimental
    from pedl.model_def import load_model_definition

    model = write_tiny_model(tmp_path / "submitted")
    trial_def = load_model_definition(model).trial_class
    monkeypatch.setenv("PEDL_MASTER", cluster.master)
    experiment = pedl.experimental.create(trial_def, model, config=tiny_config(max_batches=20))
    assert experiment.wait(timeout=300) == "COMPLETED", cluster.logs()
    assert experiment.top_checkpoint().total_batches == 20


def test_checkpoints_beyond_the_save_policy_are_deleted_from_storage(cluster, tmp_path) -> None:
    config = tiny_config(max_batches=60, validation_period=20) + "min_checkpoint_period:\n  batches: 20\n"
    exp_id = submit(cluster, write_tiny_model(tmp_path / "gc_model"), config)
    result = wait(cluster, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=result.trials[0].id))
    # Listed: the COMPLETED ones, which garbage collection (marking them DELETING first) may have begun on.
    assert {c.total_batches for c in detail.checkpoints} <= {20, 40, 60}
    assert detail.checkpoints[-1].total_batches == 60
    # Defaults keep the trial's latest and its best (validated at 20, 40, 60): at most two survive.
    deadline = time.monotonic() + 30
    while True:
        with CheckpointStoreClient(cluster.store.address) as store:
            stored = {c.uuid for c in store.list(experiment_id=exp_id)}
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=result.trials[0].id))
        live = {c.uuid for c in detail.checkpoints if c.state == common_pb2.CHECKPOINT_STATE_COMPLETED}
        if len(stored) <= 2 and stored == live:
            break
        assert time.monotonic() < deadline, (stored, live)
        time.sleep(0.2)
    assert detail.checkpoints[-1].uuid in stored  # the latest is always kept
