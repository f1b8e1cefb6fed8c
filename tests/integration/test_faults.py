"""Real processes killed for real: trials survive agent and scheduler crashes."""

from __future__ import annotations

import os
import signal
import time

import pytest
from test_cluster import logs, stub, submit, wait, wait_for_steps

from pedl._metrics import from_struct
from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

# Deterministic: a fixed experiment seed, checkpoints every 2 steps.
CONFIG = tiny_config(
    max_batches=120,
    batches_per_step=10,
    validation_period=40,
    extra="reproducibility:\n  experiment_seed: 7\nmin_checkpoint_period:\n  batches: 20\n",
)


def trial_history(cluster, exp_id: int) -> tuple[list, list]:
    (trial,) = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    steps = [(s.total_batches, from_struct(s.metrics)) for s in detail.steps]
    validations = [(v.total_batches, from_struct(v.metrics)) for v in detail.validations]
    return steps, validations


def test_a_trial_on_a_killed_agent_finishes_on_another_with_the_same_metrics(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", agents=2) as cluster:
        model = write_tiny_model(tmp_path / "tiny")
        reference = submit(cluster, model, CONFIG)
        assert wait(cluster, reference).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED

        exp_id = submit(cluster, model, CONFIG)
        wait_for_steps(cluster, exp_id, 5)
        (trial,) = (
            stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
        )
        victim = next(a for a in cluster.agents if a.name == trial.agent_id)
        os.kill(victim.process.pid, signal.SIGKILL)

        result = wait(cluster, exp_id)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        assert result.trials[0].restarts == 0  # a lost agent does not spend max_restarts
        assert trial_history(cluster, exp_id) == trial_history(cluster, reference)


def test_the_scheduler_killed_and_restarted_continues_the_experiment(tmp_path) -> None:
    # The grace period covers the agents' reconnect back-off (up to 5 s) plus the restart.
    with local_cluster(tmp_path / "cluster", agents=1, reconnect_grace=20) as cluster:
        model = write_tiny_model(tmp_path / "tiny")
        reference = submit(cluster, model, CONFIG)
        assert wait(cluster, reference).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED

        exp_id = submit(cluster, model, CONFIG)
        wait_for_steps(cluster, exp_id, 4)
        cluster.kill_scheduler()
        time.sleep(1)
        cluster.start_scheduler()

        result = wait(cluster, exp_id)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, logs(
            cluster, result.trials[0].id
        )
        steps, validations = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == list(range(10, 121, 10))  # none lost, none twice
        assert (steps, validations) == trial_history(cluster, reference)
