"""Determined's TFKerasTrial and EstimatorTrial (with their contexts) run unchanged on a local
cluster and resume exactly after their agent is killed with SIGKILL mid-trial; EstimatorTrial in the
TensorFlow 2.15 environment (scripts/build-tf215-env) that an agent offers as `tf215`."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml
from test_cluster import stub, submit, wait, wait_for_steps
from test_estimator import tf215_python  # noqa: F401  (the fixture)
from test_faults import trial_history

from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def small(example: str, batches: int) -> str:
    raw = yaml.safe_load((EXAMPLES / example / "const.yaml").read_text())
    raw["searcher"]["max_length"] = {"batches": batches}
    raw.update(
        scheduling_unit=10,
        min_validation_period={"batches": 20},
        min_checkpoint_period={"batches": 20},
        reproducibility={"experiment_seed": 11},
    )
    return yaml.safe_dump(raw)


def killed_run_matches_reference(cluster, example: str, config: str) -> None:
    reference = submit(cluster, EXAMPLES / example, config)
    assert wait(cluster, reference, timeout=300).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, (
        cluster.logs()
    )
    exp_id = submit(cluster, EXAMPLES / example, config)
    wait_for_steps(cluster, exp_id, 3, timeout=180)
    (trial,) = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
    victim = next(a for a in cluster.agents if a.name == trial.agent_id)
    os.kill(victim.process.pid, signal.SIGKILL)
    result = wait(cluster, exp_id, timeout=300)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    assert result.trials[0].restarts == 0  # a lost agent does not spend max_restarts
    steps, validations = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == list(range(10, 61, 10))
    assert "accuracy" in validations[-1][1]
    assert (steps, validations) == trial_history(cluster, reference)


def test_a_determined_tfkeras_trial_resumes_exactly_after_its_agent_is_killed(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", agents=2) as cluster:
        killed_run_matches_reference(cluster, "digits_determined_keras", small("digits_determined_keras", 60))


def test_a_determined_estimator_trial_resumes_exactly_after_its_agent_is_killed(
    tmp_path,
    tf215_python: str,  # noqa: F811
) -> None:
    agent_args = ["--environment", f"tf215={tf215_python}"]
    with local_cluster(tmp_path / "cluster", agents=2, agent_args=agent_args) as cluster:
        config = small("digits_determined_estimator", 60)
        killed_run_matches_reference(cluster, "digits_determined_estimator", config)
