"""Pausing, resuming and priority preemption with real processes: trials stop at a step boundary
with a checkpoint, give their slots up, and later finish with the metrics of an uninterrupted run."""

from __future__ import annotations

import time

import pytest
from test_cluster import stub, submit, wait, wait_for_steps
from test_faults import CONFIG, trial_history

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration


def experiment(cluster, exp_id: int) -> scheduler_pb2.GetExperimentResponse:
    return stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for both tests (a start costs seconds on a loaded machine): each leaves its one
    slot free, and reads only its own experiments."""
    with local_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


def wait_until(predicate, cluster, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.05)


def test_pause_releases_the_slot_and_activate_finishes_with_the_same_metrics(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "tiny")
    reference = submit(cluster, model, CONFIG)
    assert wait(cluster, reference).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED

    exp_id = submit(cluster, model, CONFIG)
    wait_for_steps(cluster, exp_id, 3)
    stub(cluster).PauseExperiment(scheduler_pb2.PauseExperimentRequest(experiment_id=exp_id))
    wait_until(lambda: not experiment(cluster, exp_id).trials[0].agent_id, cluster)
    paused = experiment(cluster, exp_id)
    assert paused.experiment.state == common_pb2.EXPERIMENT_STATE_PAUSED
    assert paused.trials[0].state == common_pb2.TRIAL_STATE_PAUSED
    agents = stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest()).agents
    assert all(slot.trial_id == 0 for slot in agents[0].slots)
    steps_when_paused = paused.trials[0].num_steps
    time.sleep(1)
    assert experiment(cluster, exp_id).trials[0].num_steps == steps_when_paused

    stub(cluster).ActivateExperiment(scheduler_pb2.ActivateExperimentRequest(experiment_id=exp_id))
    result = wait(cluster, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
    assert result.trials[0].restarts == 0
    assert trial_history(cluster, exp_id) == trial_history(cluster, reference)


def test_a_higher_priority_experiment_preempts_a_lower_one_which_finishes_later(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "tiny")
    low_config = CONFIG + "resources:\n  priority: 60\n"
    reference = submit(cluster, model, low_config)
    assert wait(cluster, reference).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED

    low = submit(cluster, model, low_config)
    wait_for_steps(cluster, low, 3)
    high = submit(cluster, model, tiny_config(max_batches=20) + "resources:\n  priority: 10\n")
    assert wait(cluster, high).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
    assert experiment(cluster, low).experiment.state == common_pb2.EXPERIMENT_STATE_ACTIVE

    result = wait(cluster, low)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
    (trial,) = result.trials
    assert trial.run_id >= 2 and trial.restarts == 0  # stopped and resumed, not failed
    assert trial_history(cluster, low) == trial_history(cluster, reference)
