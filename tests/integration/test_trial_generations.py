"""Model definitions written for PEDL 0.11 and for Determined's PyTorchTrial, run unchanged on a
local cluster: searched with adaptive_asha, distributed over gloo, and resumed exactly after an
agent is killed with SIGKILL mid-trial."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from test_cluster import stub, submit, wait, wait_for_steps
from test_faults import trial_history

from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PEDL011 = """
entrypoints:
  trial_class: model_def:DigitsTrial
  data_loaders_function: data:make_data_loaders
  download_data_function: data:download_data
hyperparameters:
  learning_rate: {type: const, val: 0.05}
  n_filters: {type: const, val: 4}
  dropout: {type: const, val: 0.1}
  batch_size: {type: const, val: 16}
"""

DETERMINED = """
entrypoint: model_def:DigitsTrial
hyperparameters:
  global_batch_size: 16
  learning_rate: 0.003
  hidden_size: 32
  dropout: 0.1
"""

# Deterministic: a fixed experiment seed; checkpoints every 2 steps, so a kill loses work to redo.
SINGLE = """
searcher: {name: single, metric: validation_error, smaller_is_better: true, max_length: {batches: 60}}
batches_per_step: 10
min_validation_period: {batches: 30}
min_checkpoint_period: {batches: 20}
reproducibility: {experiment_seed: 7}
"""

ASHA = """
searcher:
  name: adaptive_asha
  metric: validation_error
  smaller_is_better: true
  max_length: {batches: 40}
  max_trials: 4
  max_rungs: 2
  divisor: 4
batches_per_step: 10
reproducibility: {experiment_seed: 3}
"""

GENERATIONS = {
    "pedl011": ("digits_pytorch_pedl011", PEDL011),
    "determined": ("digits_determined_pytorch", DETERMINED),
}


@pytest.mark.parametrize("generation", sorted(GENERATIONS))
def test_a_killed_agent_resumes_the_trial_exactly(tmp_path, generation: str) -> None:
    example, model_config = GENERATIONS[generation]
    config = model_config + SINGLE
    with local_cluster(tmp_path / "cluster", agents=2) as cluster:
        reference = submit(cluster, EXAMPLES / example, config)
        assert wait(cluster, reference).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, (
            cluster.logs()
        )

        exp_id = submit(cluster, EXAMPLES / example, config)
        wait_for_steps(cluster, exp_id, 3)
        (trial,) = (
            stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
        )
        victim = next(a for a in cluster.agents if a.name == trial.agent_id)
        os.kill(victim.process.pid, signal.SIGKILL)

        result = wait(cluster, exp_id)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        assert result.trials[0].restarts == 0  # a lost agent does not spend max_restarts
        steps, validations = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == list(range(10, 61, 10))
        assert "validation_error" in validations[-1][1]
        assert (steps, validations) == trial_history(cluster, reference)


@pytest.mark.parametrize("generation", sorted(GENERATIONS))
def test_an_adaptive_asha_search_completes(tmp_path, generation: str) -> None:
    example, model_config = GENERATIONS[generation]
    model_config = model_config.replace(
        "learning_rate: {type: const, val: 0.05}",
        "learning_rate: {type: log, minval: -2, maxval: -1, base: 10}",
    )
    model_config = model_config.replace(
        "learning_rate: 0.003", "learning_rate: {type: log, minval: -3, maxval: -2, base: 10}"
    )
    with local_cluster(tmp_path / "cluster", agents=1, slots=2) as cluster:
        exp_id = submit(cluster, EXAMPLES / example, model_config + ASHA)
        result = wait(cluster, exp_id, timeout=300)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        # ASHA may continue a stopped configuration as a further trial; each of the 4 ran.
        assert len({str(t.hparams) for t in result.trials}) == 4
        assert max(t.total_batches for t in result.trials) == 40
        assert all(t.best_validation_metric <= 1.0 for t in result.trials)


@pytest.mark.parametrize("generation", sorted(GENERATIONS))
def test_a_trial_trains_on_two_slots_over_gloo(tmp_path, generation: str) -> None:
    example, model_config = GENERATIONS[generation]
    config = (
        model_config + SINGLE.replace("batches: 60", "batches: 40") + "resources:\n  slots_per_trial: 2\n"
    )
    with local_cluster(tmp_path / "cluster", agents=1, slots=2) as cluster:
        exp_id = submit(cluster, EXAMPLES / example, config)
        result = wait(cluster, exp_id, timeout=180)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        steps, validations = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == [10, 20, 30, 40]
        assert 0.0 <= validations[-1][1]["validation_error"] <= 1.0
