"""What Determined's client reads off a trial and an experiment in REST answers: a trial's latest and best
validation and its best checkpoint (the one at the best validation), an experiment's config with its
defaults; the shapes read each validation's metrics once and share the decoded config, so these pin what
a user sees."""

from __future__ import annotations

import json

from pedl._metrics import to_struct
from pedl.config import carried
from pedl.config.experiment import parse_experiment_config
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui import configs
from pedl_webui.rest import shapes

CONFIG = "searcher: {name: single, metric: error, max_length: {batches: 30}}\nhyperparameters: {lr: 0.1}\n"


def _experiment() -> scheduler_pb2.Experiment:
    document = carried.masked_json(parse_experiment_config(CONFIG))
    return scheduler_pb2.Experiment(
        id=3, state=common_pb2.EXPERIMENT_STATE_ACTIVE, config_yaml=CONFIG, config_document=document,
        searcher_metric="error", smaller_is_better=True,
    )  # fmt: skip


def _validation(batches: int, **metrics: object) -> scheduler_pb2.Validation:
    return scheduler_pb2.Validation(total_batches=batches, metrics=to_struct(metrics))


def _checkpoint(batches: int) -> common_pb2.Checkpoint:
    return common_pb2.Checkpoint(
        uuid=f"ck-{batches}", trial_id=5, experiment_id=3, total_batches=batches,
        state=common_pb2.CHECKPOINT_STATE_COMPLETED,
    )  # fmt: skip


def test_a_trial_shows_its_newest_validation_and_its_best_with_the_checkpoint_taken_there() -> None:
    trial = scheduler_pb2.Trial(id=5, experiment_id=3, state=common_pb2.TRIAL_STATE_ACTIVE, total_batches=30)
    validations = [
        _validation(10, error=0.5),
        _validation(20, error=0.2),
        _validation(30, error=0.4, note="x"),
    ]
    checkpoints = [_checkpoint(10), _checkpoint(20), _checkpoint(30)]
    for smaller, best_at in ((True, 20), (False, 10)):
        value = shapes.trial_json(trial, None, validations, checkpoints, "error", smaller)
        assert value["latestValidation"]["totalBatches"] == 30
        assert value["latestValidation"]["metrics"]["avgMetrics"] == {"error": 0.4, "note": "x"}
        assert value["bestValidation"]["totalBatches"] == best_at
        assert value["bestCheckpoint"]["uuid"] == f"ck-{best_at}"
        assert value["checkpointCount"] == 3


def test_a_trial_whose_validations_lack_the_metric_has_no_best_and_its_newest_checkpoint() -> None:
    trial = scheduler_pb2.Trial(id=5, experiment_id=3, state=common_pb2.TRIAL_STATE_COMPLETED)
    validations = [_validation(10, loss=1.0), _validation(20, error="n/a")]
    value = shapes.trial_json(trial, None, validations, [_checkpoint(10), _checkpoint(20)], "error", True)
    assert "bestValidation" not in value
    assert value["latestValidation"]["metrics"]["avgMetrics"] == {"error": "n/a"}
    assert value["bestCheckpoint"]["uuid"] == "ck-20"


def test_an_experiments_config_is_its_config_with_defaults_and_answers_stay_apart() -> None:
    exp = _experiment()
    first, second = shapes.experiment_json(exp), shapes.experiment_json(exp)
    assert first["config"] == configs.masked_raw(configs.experiment_config(exp))
    assert first["config"]["searcher"]["metric"] == "error"
    # A checkpoint's experimentConfig names pedl's store and leaves the experiment's own untouched.
    ck = shapes.checkpoint_json(_checkpoint(10), exp)
    assert ck["training"]["experimentConfig"]["checkpoint_storage"]["type"] == "directory"
    assert json.dumps(second["config"]) == json.dumps(first["config"])
    assert first["config"].get("checkpoint_storage", {}).get("type") != "directory"
