"""The web UI reads lengths, searcher fields and hyperparameter types from the typed config the scheduler
sends (Experiment.config_document), so a page shows the trial lengths the scheduler trains to, in
whatever unit the config wrote them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pedl.config import MASK, carried
from pedl.config.experiment import parse_experiment_config
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui import configs, views
from pedl_webui.rest import shapes


def exp_response(config: str, *trials: scheduler_pb2.Trial) -> scheduler_pb2.GetExperimentResponse:
    document = carried.masked_json(parse_experiment_config(config))
    exp = scheduler_pb2.Experiment(
        id=7, state=common_pb2.EXPERIMENT_STATE_ACTIVE, config_yaml=config, config_document=document, name="n"
    )
    return scheduler_pb2.GetExperimentResponse(experiment=exp, trials=list(trials))


def trial(id_: int, state: str, batches: int, epoch_batches: int = 0, **hparams: Any) -> scheduler_pb2.Trial:
    t = scheduler_pb2.Trial(
        id=id_, experiment_id=7, state=getattr(common_pb2, f"TRIAL_STATE_{state}"), total_batches=batches,
        epoch_batches=epoch_batches,
    )  # fmt: skip
    t.hparams.update(hparams)
    return t


def asha(length: str, space: str, extra: str = "") -> str:
    return (
        f"searcher: {{name: adaptive_asha, metric: error, max_trials: 2, max_length: {length}}}\n"
        f"hyperparameters: {space}\n{extra}"
    )


@pytest.mark.parametrize(
    ("config", "trials", "progress", "rungs"),
    [
        # Records with a const batch size: 6400 records of 64 are 100 batches for every trial.
        (
            asha("{records: 6400}", "{global_batch_size: 64}"),
            [trial(1, "ACTIVE", 50, global_batch_size=64), trial(2, "COMPLETED", 25, global_batch_size=64)],
            0.75,
            [{"batches": 25, "stopped_trials": [2]}],
        ),
        # Records with each trial's own batch size: 6400 records are 200 batches of 32, 100 of 64.
        (
            asha("{records: 6400}", "{global_batch_size: {type: categorical, vals: [32, 64]}}"),
            [trial(1, "ACTIVE", 100, global_batch_size=32), trial(2, "ACTIVE", 100, global_batch_size=64)],
            0.75,
            [],
        ),
        # Epochs by records_per_epoch: 2 epochs of 1000 records in batches of 100 are 20 batches.
        (
            asha("{epochs: 2}", "{global_batch_size: 100}", "records_per_epoch: 1000\n"),
            [trial(1, "ACTIVE", 10, global_batch_size=100), trial(2, "COMPLETED", 20, global_batch_size=100)],
            0.75,
            [],
        ),
        # Epochs each trial's harness measured (its data loader's length); one not measured yet counts 0.
        (
            asha("{epochs: 2}", "{lr: 0.1}"),
            [trial(1, "ACTIVE", 50, epoch_batches=50, lr=0.1), trial(2, "ACTIVE", 30, lr=0.1)],
            0.25,
            [],
        ),
        # Old PEDL steps: max_steps of batches_per_step.
        (
            "searcher: {name: adaptive_asha, metric: error, max_trials: 2, max_steps: 10}\n"
            "batches_per_step: 50\nhyperparameters: {lr: 0.1}\n",
            [trial(1, "ACTIVE", 250, lr=0.1), trial(2, "COMPLETED", 100, lr=0.1)],
            0.75,
            [{"batches": 100, "stopped_trials": [2]}],
        ),
    ],
    ids=["records-const", "records-per-trial", "epochs-records-per-epoch", "epochs-measured", "pedl-steps"],
)
def test_progress_and_rungs_count_each_trials_length_as_the_scheduler_does(
    config: str, trials: list[scheduler_pb2.Trial], progress: float, rungs: list[dict[str, Any]]
) -> None:
    detail = views.experiment_detail(exp_response(config, *trials))
    assert detail["searcher"] == "adaptive_asha"
    assert detail["progress"] == progress
    assert detail["rungs"] == rungs


def test_hyperparameters_take_the_typed_spaces_types_on_pages_and_rest() -> None:
    config = asha("{batches: 100}", "{layers: {type: int, minval: 1, maxval: 4}, lr: 0.5, api_key: abc}")
    t = trial(1, "COMPLETED", 100, layers=3, lr=0.5, api_key=MASK)
    response = exp_response(config, t)
    row = views.experiment_detail(response)["trials"][0]
    assert row["hparams"] == {"layers": 3, "lr": 0.5, "api_key": MASK}
    assert isinstance(row["hparams"]["layers"], int)
    page = views.trial_detail(scheduler_pb2.GetTrialResponse(trial=t), response.experiment)
    assert isinstance(page["hparams"]["layers"], int)
    rest = shapes.trial_json(t, configs.hparam_space(configs.experiment_config(response.experiment)))
    assert rest["hparams"]["layers"] == 3 and isinstance(rest["hparams"]["layers"], int)


def test_the_rest_experiment_shows_the_typed_configs_searcher_pool_and_masked_secrets() -> None:
    config = (
        "name: n\nsearcher: {name: random, metric: error, max_trials: 3, max_length: 100}\n"
        "resources: {resource_pool: gpus}\nhyperparameters: {lr: 0.1}\n"
        "checkpoint_storage: {type: s3, bucket: b, access_key: AKIA123, secret_key: hush}\n"
    )
    exp = exp_response(config).experiment
    value = shapes.experiment_json(exp)
    assert (value["name"], value["searcherType"], value["resourcePool"]) == ("n", "random", "gpus")
    assert value["config"]["searcher"]["max_trials"] == 3
    assert value["config"]["checkpoint_storage"]["secret_key"] == MASK
    assert "hush" not in json.dumps(value["config"]) and "AKIA123" not in json.dumps(value["config"])
    checkpoint = shapes.checkpoint_json(common_pb2.Checkpoint(uuid="u", trial_id=1, experiment_id=7), exp)
    assert checkpoint["training"]["experimentConfig"]["searcher"]["name"] == "random"
    assert checkpoint["training"]["experimentConfig"]["checkpoint_storage"]["type"] == "directory"


def test_a_listing_without_the_document_shows_no_searcher_rather_than_guessing() -> None:
    exp = scheduler_pb2.Experiment(id=3, config_yaml="searcher: {name: random}\n")
    value = shapes.experiment_json(exp)
    assert (value["name"], value["searcherType"], value["resourcePool"], value["config"]) == (
        "Experiment 3", "", "default", {}
    )  # fmt: skip
    assert views.experiment_summary(scheduler_pb2.GetExperimentResponse(experiment=exp))["searcher"] == ""
