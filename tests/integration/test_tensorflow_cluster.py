"""TensorFlowTrial and KerasTrial examples on real processes: trained, validated, checkpointed, resumed."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from test_cluster import stub, submit, wait, wait_for_steps
from test_faults import trial_history

from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).parents[2] / "examples"


def config(example: str) -> str:
    raw = yaml.safe_load((EXAMPLES / example / "const.yaml").read_text())
    raw["searcher"].pop("max_steps")
    raw["searcher"]["max_length"] = {"batches": 60}
    raw.update(
        batches_per_step=10,
        min_validation_period={"batches": 20},
        min_checkpoint_period={"batches": 20},
        reproducibility={"experiment_seed": 7},
    )
    return yaml.safe_dump(raw)


def test_a_tensorflow_trial_trains_validates_and_checkpoints(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", preload_tensorflow=True) as cluster:
        exp_id = submit(cluster, EXAMPLES / "digits_tensorflow", config("digits_tensorflow"))
        result = wait(cluster, exp_id, timeout=180)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        steps, validations = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == [10, 20, 30, 40, 50, 60]
        assert all(set(m) == {"loss", "error"} for _, m in steps)
        assert [b for b, _ in validations] == [20, 40, 60]
        assert validations[-1][1]["validation_error"] < 0.3
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=result.trials[0].id))
        assert [c.total_batches for c in detail.checkpoints][-1] == 60


def test_a_keras_trial_on_a_killed_agent_resumes_with_the_same_metrics(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", agents=2, preload_tensorflow=True) as cluster:
        model = EXAMPLES / "digits_keras"
        reference = submit(cluster, model, config("digits_keras"))
        assert wait(cluster, reference, timeout=180).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED

        exp_id = submit(cluster, model, config("digits_keras"))
        wait_for_steps(cluster, exp_id, 3)
        (trial,) = (
            stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
        )
        victim = next(a for a in cluster.agents if a.name == trial.agent_id)
        os.kill(victim.process.pid, signal.SIGKILL)

        result = wait(cluster, exp_id, timeout=180)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        assert result.trials[0].restarts == 0  # a lost agent does not spend max_restarts
        history = trial_history(cluster, exp_id)
        assert history == trial_history(cluster, reference)
        assert {"val_loss", "val_accuracy"} <= set(history[1][-1][1])


def test_trials_are_forked_before_the_fork_server_has_imported_tensorflow(tmp_path) -> None:
    """The fork server reports ready with torch alone and imports TensorFlow after a quiet spell (an
    hour, here) or once a run has imported it: a PyTorch trial is forked at once, a Keras trial forked
    then imports TF itself, and the server imports it right after, for the Keras runs to come."""
    agent_args = ["--preload-tensorflow-after", "3600"]
    with local_cluster(tmp_path / "cluster", agent_args=agent_args, preload_tensorflow=True) as cluster:
        agent_log = cluster.agents[0].log
        deadline = time.monotonic() + 300
        while '"fork server ready"' not in agent_log():
            assert time.monotonic() < deadline, agent_log()
            time.sleep(0.2)
        for example in ("digits_pytorch", "digits_keras"):
            exp_id = submit(cluster, EXAMPLES / example, config(example))
            result = wait(cluster, exp_id, timeout=180)
            assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
            assert len(trial_history(cluster, exp_id)[1]) == 3  # validations at 20, 40 and 60 batches
            if example == "digits_pytorch":
                assert "fork server imported tensorflow" not in agent_log()
        assert "starting harnesses as new processes" not in agent_log()  # both were forked
        while "fork server imported tensorflow" not in agent_log():  # asked for by the Keras run
            assert time.monotonic() < deadline, agent_log()
            time.sleep(0.2)
