"""Trials that end themselves, on a real local cluster, as Determined documents: a PyTorchTrial's
`context.set_stop_requested(True)` finishes its step, checkpoints and ends COMPLETED while the
random search's other trials run their length; `det.InvalidHP` raised by a Core API script or in a
Trial ends its trial (INVALID_HP) without an error or a restart. Either way the experiment COMPLETES."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_cluster import logs, stub, submit, wait

from pedl.config import parse_experiment_config
from pedl.searcher import make_search_method
from pedl.searcher._ops import Create
from pedl.v1 import common_pb2, scheduler_pb2
from support.determined_models import stopping_config, write_stopping_trial
from support.processes import local_cluster

pytestmark = pytest.mark.integration

REASON = common_pb2.EarlyExitReason
COMPLETED = common_pb2.EXPERIMENT_STATE_COMPLETED

INVALID_HP_SCRIPT = """
import determined as det

with det.core.init() as core_context:
    for step in range(1, 4):
        core_context.train.report_training_metrics(steps_completed=step * 10, metrics={"loss": 1.0 / step})
    raise det.InvalidHP("this learning rate cannot train")
"""


def mixed_seed(config: str, trials: int) -> int:
    """An experiment seed whose random search samples both a stopping trial and a full-length one."""
    for seed in range(100):
        parsed = parse_experiment_config(config + f"reproducibility: {{experiment_seed: {seed}}}\n")
        ops = make_search_method(parsed, seed).initial_operations()
        stops = [op.hparams["stop_at"] for op in ops if isinstance(op, Create)]
        if len(stops) == trials and 0 < stops.count(7) < trials:
            return seed
    raise AssertionError("no seed samples both kinds of trial")


def test_trials_that_end_themselves_complete_early_and_the_experiments_complete(tmp_path: Path) -> None:
    config = stopping_config("name: random, max_trials: 3", 20)
    config += f"reproducibility: {{experiment_seed: {mixed_seed(config, 3)}}}\n"
    script_dir = tmp_path / "invalid_hp"
    script_dir.mkdir()
    (script_dir / "train.py").write_text(INVALID_HP_SCRIPT)
    script_config = (
        "name: invalid-hp\nentrypoint: python3 train.py\nmax_restarts: 3\n"
        "searcher: {name: single, metric: loss, max_length: {batches: 100}}\n"
    )
    invalid = yaml.safe_load(stopping_config("name: single", 20))
    invalid.update(
        max_restarts=3, hyperparameters={"global_batch_size": 8, "lr": 0.01, "stop_at": 0, "invalid": True}
    )
    invalid_config = yaml.safe_dump(invalid)
    with local_cluster(tmp_path / "cluster", agents=1, slots=2) as cluster:
        try:
            exp_id = submit(cluster, write_stopping_trial(tmp_path / "stop"), config)
            script_exp = submit(cluster, script_dir, script_config)
            invalid_exp = submit(cluster, tmp_path / "stop", invalid_config)

            result = wait(cluster, exp_id, timeout=420)
            assert result.experiment.state == COMPLETED
            assert len(result.trials) == 3
            for trial in result.trials:
                assert trial.state == common_pb2.TRIAL_STATE_COMPLETED and trial.restarts == 0
                detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
                stored = [c.total_batches for c in detail.checkpoints]
                if trial.hparams["stop_at"]:
                    # Batch 7 is in the step of batches 6-10: the step finishes, then a checkpoint.
                    assert trial.total_batches == 10 and stored == [10]
                    assert trial.early_exit == REASON.EARLY_EXIT_REASON_USER_REQUESTED_STOP
                    assert "completed early at batch 10" in logs(cluster, trial.id)
                else:
                    assert trial.total_batches == 20 and stored == [20]
                    assert trial.early_exit == REASON.EARLY_EXIT_REASON_UNSPECIFIED

            script = wait(cluster, script_exp, timeout=240)
            assert script.experiment.state == COMPLETED
            (trial,) = script.trials
            assert trial.state == common_pb2.TRIAL_STATE_COMPLETED
            assert (trial.restarts, trial.error) == (0, "")
            assert trial.early_exit == REASON.EARLY_EXIT_REASON_INVALID_HP
            assert trial.total_batches == 30

            # A Trial raising det.InvalidHP in __init__: no restart (max_restarts 3), COMPLETED.
            invalid = wait(cluster, invalid_exp, timeout=240)
            assert invalid.experiment.state == COMPLETED
            (trial,) = invalid.trials
            assert trial.state == common_pb2.TRIAL_STATE_COMPLETED
            assert (trial.restarts, trial.total_batches) == (0, 0)
            assert trial.early_exit == REASON.EARLY_EXIT_REASON_INVALID_HP
            assert "det.InvalidHP: these hyperparameters cannot train" in logs(cluster, trial.id)
        except BaseException:
            print(cluster.logs())
            raise
