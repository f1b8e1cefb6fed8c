"""Lengths in epochs without `records_per_epoch`, on a real cluster: a PyTorch trial's epoch is its
training data loader's length (Determined since 0.2x), measured by the harness when the trial starts;
a Keras trial, which has no such length, is refused in one line naming records_per_epoch."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_cluster import logs, stub, submit, wait

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
IN_EPOCHS = {"max_length": {"epochs": 2}, "min_validation_period": {"epochs": 1}}

TINY = """\
description: tiny in epochs
hyperparameters: {learning_rate: 0.1}
searcher: {name: single, metric: error, max_length: {epochs: 2}}
min_validation_period: {epochs: 1}
batches_per_step: 10
"""


def in_epochs(example: str, epochs: int, **extra: object) -> str:
    raw = yaml.safe_load((EXAMPLES / example / "const.yaml").read_text())
    raw["searcher"].pop("max_steps", None)
    raw["searcher"]["max_length"] = {"epochs": epochs}
    raw.pop("records_per_epoch", None)
    raw.update(min_validation_period={"epochs": 1}, **extra)
    return yaml.safe_dump(raw)


def trial_detail(cluster, result: scheduler_pb2.GetExperimentResponse) -> scheduler_pb2.GetTrialResponse:
    (trial,) = result.trials
    return stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))


def test_epochs_count_the_chiefs_data_loader_and_a_keras_trial_is_refused(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", preload_tensorflow=True) as cluster:
        try:
            # pedl's PyTorchTrial: 256 records in batches of 8, so an epoch is 32 batches.
            tiny = wait(cluster, submit(cluster, write_tiny_model(tmp_path / "tiny"), TINY))
            assert tiny.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
            detail = trial_detail(cluster, tiny)
            assert detail.trial.epoch_batches == 32
            assert detail.steps[-1].total_batches == 64 == detail.trial.total_batches
            assert [v.total_batches for v in detail.validations] == [32, 64]
            assert "one epoch is 32 batches" in logs(cluster, detail.trial.id)

            # Determined's pytorch.PyTorchTrial through pedl's adapter: 1438 digits in batches of 32.
            digits = EXAMPLES / "digits_determined_pytorch"
            det = wait(cluster, submit(cluster, digits, in_epochs("digits_determined_pytorch", 2)), 300)
            assert det.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
            detail = trial_detail(cluster, det)
            assert detail.trial.epoch_batches == 45
            assert [v.total_batches for v in detail.validations] == [45, 90]

            # A Keras trial has no loader length: refused, naming records_per_epoch, and not retried.
            keras = in_epochs("digits_keras", 1, max_restarts=5)
            refused = wait(cluster, submit(cluster, EXAMPLES / "digits_keras", keras), 300)
            assert refused.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
            (trial,) = refused.trials
            assert trial.restarts == 1  # two runs refused alike end the trial
            assert "records_per_epoch: the config gives lengths in epochs" in trial.error
            assert trial.total_batches == 0
        except BaseException:
            print(cluster.logs())
            raise
