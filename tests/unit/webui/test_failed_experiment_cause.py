"""An experiment that failed names the first failing trial's cause wherever a user looks at it: the
CLI's `describe` and `describe --json` records, and the web UI's experiment page (its JSON)."""

from __future__ import annotations

import json

from pedl import records
from pedl.cli import render
from pedl.config import carried, parse_experiment_config
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui import views

CAUSE = (
    "every trial failed; the first, trial 2: the entrypoint 'python3 model_def_adaptive.py' exited with "
    "code 1: NameError: name 'pathlib' is not defined (at model_def_adaptive.py:112)"
)


def failed() -> scheduler_pb2.GetExperimentResponse:
    config = "searcher: {name: single, metric: test_loss, max_length: {batches: 8}}\nhyperparameters: {}\n"
    exp = scheduler_pb2.Experiment(
        id=4, state=common_pb2.EXPERIMENT_STATE_ERROR, config_yaml=config, error=CAUSE,
        config_document=carried.masked_json(parse_experiment_config(config)), searcher_metric="test_loss",
    )  # fmt: skip
    trial = scheduler_pb2.Trial(id=2, experiment_id=4, state=common_pb2.TRIAL_STATE_ERROR, error=CAUSE)
    return scheduler_pb2.GetExperimentResponse(experiment=exp, trials=[trial])


def test_describe_its_json_and_the_web_ui_name_the_first_failing_trials_cause() -> None:
    response = failed()
    text = render.describe_experiment(response, [])
    assert f"Error: {CAUSE}" in " ".join(text.split())
    assert json.loads(json.dumps(records.experiment_record(response.experiment)))["error"] == CAUSE
    page = json.loads(json.dumps(views.experiment_detail(response), default=str))
    assert page["error"] == CAUSE
