"""A model definition that raises before training fails every run the same way: the trial ends
ERROR after the first repeat, its error shown once, instead of after max_restarts tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cluster import logs, submit, wait

from pedl.v1 import common_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def broken_data_loaders(directory: Path) -> Path:
    model = write_tiny_model(directory)
    init = model / "__init__.py"
    init.write_text(
        init.read_text().replace(
            "def make_data_loaders(experiment_config, hparams):\n",
            "def make_data_loaders(experiment_config, hparams):\n"
            "    raise FileNotFoundError('no such file: data/train.csv')\n",
        )
    )
    return model


def test_a_trial_failing_the_same_way_before_training_stops_after_the_first_repeat(tmp_path) -> None:
    cases = [
        (
            write_tiny_model(tmp_path / "build", build_model_body="raise ValueError('bad layer size')"),
            "ValueError: bad layer size",
            "ValueError at __init__.py:",
        ),
        (
            broken_data_loaders(tmp_path / "loaders"),
            "FileNotFoundError: no such file: data/train.csv",
            "FileNotFoundError at __init__.py:",
        ),
    ]
    with local_cluster(tmp_path / "cluster") as cluster:
        try:
            for model, error, where in cases:
                exp_id = submit(cluster, model, tiny_config(extra="max_restarts: 5\n"))
                result = wait(cluster, exp_id, timeout=300)  # a loaded machine starts trials slowly
                assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
                (trial,) = result.trials
                assert trial.state == common_pb2.TRIAL_STATE_ERROR
                assert trial.restarts == 1  # two runs, not six
                assert error in trial.error and "not restarted" in trial.error
                text = logs(cluster, trial.id)
                assert text.count("restarting trial") == 1
                assert f"failed again with the same error ({where}" in text
                assert text.count("failed: Traceback") <= 1  # scheduler's own report: the error once
        except BaseException:
            print(cluster.logs())
            raise
