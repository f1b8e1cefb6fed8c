"""The Simple Model Definition (a plain Keras script) on real processes: trained to COMPLETED, and
resumed from its checkpoint on another agent with the same metrics."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml
from test_cluster import logs, stub, submit, wait, wait_for_steps
from test_faults import trial_history

from pedl.checkpoints import CheckpointStoreClient
from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "examples" / "digits_keras_script"


def config() -> str:
    raw = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    raw["searcher"].pop("max_steps")
    raw["searcher"]["max_length"] = {"batches": 60}
    raw.update(
        batches_per_step=10,
        min_validation_period={"batches": 20},
        min_checkpoint_period={"batches": 20},
        reproducibility={"experiment_seed": 7},
        max_restarts=2,
    )
    return yaml.safe_dump(raw)


def test_the_keras_script_example_trains_to_completed(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", preload_tensorflow=True) as cluster:
        exp_id = submit(cluster, EXAMPLE, config())
        result = wait(cluster, exp_id, timeout=180)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        steps, validations = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == [10, 20, 30, 40, 50, 60]
        assert all(set(m) == {"loss", "accuracy"} for _, m in steps)
        assert [b for b, _ in validations] == [20, 40, 60]
        assert validations[-1][1]["val_accuracy"] > 0.7
        (trial,) = result.trials
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
        assert detail.checkpoints[-1].total_batches == 60
        with CheckpointStoreClient(cluster.store.address) as store:
            files = {f.path for f in store.get(detail.checkpoints[-1].uuid).files}
        assert {"model.weights.h5", "metadata.json"} <= files
        # fit() never returned to the script, and the harness ended cleanly on TERMINATE.
        assert "not reached under PEDL" not in logs(cluster, trial.id)
        assert trial.restarts == 0


def test_a_script_trial_on_a_killed_agent_resumes_with_the_same_metrics(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", agents=2, preload_tensorflow=True) as cluster:
        reference = submit(cluster, EXAMPLE, config())
        assert wait(cluster, reference, timeout=180).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED

        exp_id = submit(cluster, EXAMPLE, config())
        wait_for_steps(cluster, exp_id, 3)
        (trial,) = (
            stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
        )
        victim = next(a for a in cluster.agents if a.name == trial.agent_id)
        os.kill(victim.process.pid, signal.SIGKILL)

        result = wait(cluster, exp_id, timeout=180)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        assert result.trials[0].restarts == 0  # a lost agent does not spend max_restarts
        assert trial_history(cluster, exp_id) == trial_history(cluster, reference)
