"""Errors a restart cannot cure, raised before the first batch, end the trial after one retry at most
(#37.5), naming the error: an ImportError in the model definition, an entrypoint that names no class."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cluster import logs, submit, wait

from pedl.v1 import common_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def import_error_model(directory: Path) -> Path:
    model = write_tiny_model(directory)
    init = model / "__init__.py"
    init.write_text("import pedl_no_such_module  # noqa\n" + init.read_text())
    return model


def test_errors_that_repeat_before_training_end_the_trial_after_at_most_two_runs(tmp_path) -> None:
    cases = [
        (
            import_error_model(tmp_path / "imports"),
            "",
            "ModuleNotFoundError: No module named 'pedl_no_such_module'",
        ),
        (write_tiny_model(tmp_path / "notclass"), "entrypoint: ':make_data_loaders'\n", "make_data_loaders"),
        (write_tiny_model(tmp_path / "missing"), "entrypoint: ':NoSuchTrial'\n", "NoSuchTrial"),
    ]
    with local_cluster(tmp_path / "cluster") as cluster:
        try:
            for model, extra, named in cases:
                exp_id = submit(cluster, model, tiny_config(extra="max_restarts: 5\n" + extra))
                result = wait(cluster, exp_id, timeout=300)  # a loaded machine starts trials slowly
                assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
                (trial,) = result.trials
                assert trial.state == common_pb2.TRIAL_STATE_ERROR
                assert trial.restarts <= 1  # at most two runs, not six
                assert named in trial.error
                assert "not restarted" in trial.error
                assert logs(cluster, trial.id).count("restarting trial") <= 1
        except BaseException:
            print(cluster.logs())
            raise
