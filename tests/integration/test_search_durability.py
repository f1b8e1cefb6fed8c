"""Searches on the real cluster, and the same searches with the scheduler SIGKILLed mid-way:
the search continues, no trial is lost or run twice, and the trials (hyperparameters,
promotions, metrics) are those of the run without the kill."""

from __future__ import annotations

import time

import pytest
from test_cluster import logs, stub, submit, wait

from pedl._metrics import from_struct
from pedl.v1 import common_pb2, scheduler_pb2
from support.models import write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

COMMON = """
hyperparameters:
  learning_rate: {type: log, minval: -2, maxval: -0.3}
reproducibility: {experiment_seed: 3}
batches_per_step: 10
min_checkpoint_period: {batches: 10}
"""
SEARCHERS = {
    "random": "searcher: {name: random, metric: error, max_trials: 3, max_length: {batches: 30}}",
    "adaptive_asha": (
        "searcher: {name: adaptive_asha, metric: error, max_trials: 4, max_length: {batches: 40}, "
        "divisor: 2, max_rungs: 2, mode: aggressive, max_concurrent_trials: 1}"
    ),
    "pbt": (
        "searcher: {name: pbt, metric: error, population_size: 2, num_rounds: 2, "
        "length_per_round: {batches: 20}, replace_function: {truncate_fraction: 0.5}, "
        "explore_function: {resample_probability: 0.5, perturb_factor: 0.2}}"
    ),
}


def outcome(cluster, exp_id: int) -> list[tuple]:
    """Each trial's hyperparameters, state, length and validation history."""
    trials = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
    out = []
    for trial in sorted(trials, key=lambda t: t.id):
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
        steps = [s.total_batches for s in detail.steps]
        assert len(steps) == len(set(steps)), f"trial {trial.id} has duplicate steps: {steps}"
        validations = [
            (v.total_batches, round(from_struct(v.metrics)["error"], 6)) for v in detail.validations
        ]
        out.append((from_struct(trial.hparams), trial.state, trial.total_batches, validations))
    return out


def total_steps(cluster, exp_id: int) -> int:
    trials = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
    return sum(t.num_steps for t in trials)


@pytest.mark.parametrize("searcher", sorted(SEARCHERS))
def test_a_search_survives_a_scheduler_crash(tmp_path, searcher: str) -> None:
    config = COMMON + SEARCHERS[searcher] + "\n"
    with local_cluster(tmp_path / "cluster", agents=1, reconnect_grace=20) as cluster:
        model = write_tiny_model(tmp_path / "tiny")
        reference = submit(cluster, model, config)
        assert wait(cluster, reference, timeout=300).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
        expected = outcome(cluster, reference)
        assert len(expected) >= 2

        exp_id = submit(cluster, model, config)
        deadline = time.monotonic() + 120
        while total_steps(cluster, exp_id) < 4:
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.05)
        cluster.kill_scheduler()
        cluster.start_scheduler()
        result = wait(cluster, exp_id, timeout=300)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        actual = outcome(cluster, exp_id)
        if actual != expected:
            trials = (
                stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
            )
            for t in trials:
                print(
                    f"---- trial {t.id}\n"
                    + "\n".join(line for line in logs(cluster, t.id).splitlines() if not line.startswith("{"))
                )
        assert actual == expected
