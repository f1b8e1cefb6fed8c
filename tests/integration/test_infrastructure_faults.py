"""Fault budgets with the real processes: an outage of the checkpoint store costs a trial time, never
its `max_restarts`; the trial's own failures still do."""

from __future__ import annotations

import time

import pytest
from test_cluster import logs, stub, submit, wait, wait_for_steps

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

# The harness gives the store this long before its run ends as an infrastructure failure; the outage
# below outlasts it, so the trial goes through such failures (which max_restarts: 0 would not survive
# if they counted) and then through a restore that waits the rest of the outage out.
RETRY_BUDGET_S = 6
OUTAGE_S = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for both tests (a start costs seconds on a loaded machine); the outage test
    starts its checkpoint store again before it ends."""
    agent_args = ["--store-retry-budget", str(RETRY_BUDGET_S)]
    with local_cluster(tmp_path_factory.mktemp("cluster"), agent_args=agent_args) as cluster:
        yield cluster


def trial_of(cluster, exp_id: int) -> scheduler_pb2.Trial:
    (trial,) = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
    return trial


def test_a_store_outage_while_a_trial_must_restore_does_not_end_the_experiment(cluster, tmp_path) -> None:
    config = tiny_config(max_batches=80, extra="max_restarts: 0\nmin_checkpoint_period:\n  batches: 20\n")
    exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), config)
    wait_for_steps(cluster, exp_id, 2)
    api = stub(cluster)
    api.PauseExperiment(scheduler_pb2.PauseExperimentRequest(experiment_id=exp_id))
    deadline = time.monotonic() + 60
    while trial_of(cluster, exp_id).agent_id or not trial_of(cluster, exp_id).latest_checkpoint_uuid:
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.1)

    cluster.kill_store()
    down_at = time.monotonic()
    api.ActivateExperiment(scheduler_pb2.ActivateExperimentRequest(experiment_id=exp_id))
    reasons = set()
    while time.monotonic() - down_at < OUTAGE_S:
        reason = trial_of(cluster, exp_id).waiting_reason
        if reason:
            reasons.add(reason)
        time.sleep(0.2)
    cluster.start_store()

    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (trial,) = result.trials
    assert trial.restarts == 0 and trial.total_batches == 80
    assert trial.waiting_reason == ""  # nothing holds it up any more
    assert any("the checkpoint store is unreachable" in r for r in reasons), (reasons, cluster.logs())
    assert any("not counted against max_restarts" in r for r in reasons)
    text = logs(cluster, trial.id)
    assert "pedl.harness: waiting for the checkpoint store: restoring checkpoint" in text
    assert "which does not count against max_restarts" in text


# Raises at the first batch of every run: after training began, so every restart is tried (a failure
# before any batch that repeats ends the trial sooner, test_repeated_failures_on_cluster).
RAISES_IN_TRAINING = "type(self).losses = lambda self, p, l: 1 / 0"


def test_a_trial_whose_code_raises_at_every_start_still_ends_after_max_restarts(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "bad", build_model_body=RAISES_IN_TRAINING)
    exp_id = submit(cluster, model, tiny_config(extra="max_restarts: 3\n"))
    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR, cluster.logs()
    (trial,) = result.trials
    assert trial.restarts == 3 and "max_restarts is 3" in trial.error
    assert "ZeroDivisionError" in trial.error
