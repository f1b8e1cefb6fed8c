"""The CLI and the SDK read an experiment's config from the typed document the scheduler sends
(Experiment.config_document), decoded by the same decoder as the web UI's: `describe --json` shows the
validated config with integers as integers, trials' hyperparameters get their config's types, and the
stored YAML is only printed back (`experiment config`), never read again."""

from __future__ import annotations

import json

import pytest

from pedl._metrics import to_struct
from pedl.cli.main import main
from pedl.config import MASK, carried, parse_experiment_config
from pedl.experimental import client as sdk
from pedl.v1 import common_pb2, scheduler_pb2

from .fake_scheduler import Script, serve, trial

CONFIG = """\
name: typed
searcher: {name: random, metric: loss, max_trials: 2, max_length: {batches: 300}}
hyperparameters:
  layers: {type: int, minval: 1, maxval: 4}
  lr: {type: double, minval: 0.001, maxval: 0.1}
  global_batch_size: 32
checkpoint_storage: {type: s3, bucket: b, access_key: AKIA, secret_key: hush}
"""


def response(*, document: bool = True, stored_yaml: str = "") -> scheduler_pb2.GetExperimentResponse:
    config = parse_experiment_config(CONFIG)
    experiment = scheduler_pb2.Experiment(
        id=7,
        state=common_pb2.EXPERIMENT_STATE_ACTIVE,
        num_trials=1,
        # What the scheduler stores: the validated config as YAML, secrets masked.
        config_yaml=stored_yaml or config.masked_yaml(),
        config=to_struct(config.masked()),
        config_document=carried.masked_json(config) if document else "",
        searcher_metric="loss",
        smaller_is_better=True,
    )
    sampled = trial(3)
    sampled.hparams.CopyFrom(to_struct({"layers": 3, "lr": 0.01, "global_batch_size": 32}))
    return scheduler_pb2.GetExperimentResponse(experiment=experiment, trials=[sampled])


def details() -> dict[int, list[scheduler_pb2.GetTrialResponse]]:
    return {3: [scheduler_pb2.GetTrialResponse(trial=response().trials[0])]}


def cli(script: Script, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with serve(script) as address:
        assert main(["--master", address, *argv]) == 0
    return capsys.readouterr().out


def test_describe_json_shows_the_validated_config_and_typed_hyperparameters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = Script(experiments=[response()], trials=details())
    described = json.loads(cli(script, capsys, "experiment", "describe", "7", "--json"))
    config = described["experiment"]["config"]
    assert config["searcher"]["max_length"] == {"batches": 300}
    assert config["batches_per_step"] == 100 and isinstance(config["batches_per_step"], int)
    assert config["checkpoint_storage"]["secret_key"] == MASK
    hparams = described["trials"][0]["hparams"]
    assert hparams == {"layers": 3, "lr": 0.01, "global_batch_size": 32}
    assert isinstance(hparams["layers"], int)  # the Struct sent 3.0: the config's int type is back


def test_the_stored_yaml_is_printed_back_but_not_read(capsys: pytest.CaptureFixture[str]) -> None:
    """A stored YAML that says something else changes nothing but what `experiment config` prints."""
    odd = "name: not-what-the-scheduler-parsed\n"
    script = Script(experiments=[response(stored_yaml=odd)], trials=details())
    listed = json.loads(cli(script, capsys, "experiment", "list-trials", "7", "--json"))
    assert listed[0]["hparams"]["layers"] == 3 and isinstance(listed[0]["hparams"]["layers"], int)
    described = json.loads(cli(script, capsys, "experiment", "describe", "7", "--json"))
    assert described["experiment"]["config"]["name"] == "typed"
    text = cli(script, capsys, "experiment", "describe", "7")
    assert "Lengths: max_length 300 batches" in text
    assert cli(script, capsys, "experiment", "config", "7") == odd


def test_without_a_config_document_values_are_shown_as_sent(capsys: pytest.CaptureFixture[str]) -> None:
    """A ListExperiments page without documents, or a stored config this pedl cannot read: no config,
    hyperparameters as the scheduler's Struct holds them."""
    script = Script(experiments=[response(document=False)], trials=details())
    described = json.loads(cli(script, capsys, "experiment", "describe", "7", "--json"))
    assert described["experiment"]["config"] == {}
    assert described["trials"][0]["hparams"]["layers"] == 3.0
    text = cli(script, capsys, "experiment", "describe", "7")
    assert "Configuration:" in text and "Lengths:" not in text  # the Struct's summary, nothing derived


def test_a_damaged_config_document_reads_as_no_config(capsys: pytest.CaptureFixture[str]) -> None:
    damaged = response()
    damaged.experiment.config_document = '{"version": 1, "config": {"searcher": 5}}'
    described = json.loads(
        cli(Script(experiments=[damaged], trials=details()), capsys, "experiment", "describe", "7", "--json")
    )
    assert described["experiment"]["config"] == {}


def test_the_sdk_reads_the_same_typed_config() -> None:
    with serve(Script(experiments=[response()], trials=details())) as address:
        experiment = sdk.get_experiment(7, master=address)
        config = experiment.config
        config["name"] = "changed by the caller"  # a copy: the next read is unaffected
        assert experiment.get_config()["name"] == "typed"
        assert config["hyperparameters"]["layers"] == {"type": "int", "minval": 1, "maxval": 4}
        assert config["checkpoint_storage"]["access_key"] == MASK
        (only,) = experiment.trials()
        assert only.hparams == {"layers": 3, "lr": 0.01, "global_batch_size": 32}
        assert isinstance(only.hparams["layers"], int)
