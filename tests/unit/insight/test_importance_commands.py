"""`pedl experiment describe --importance` against an in-process fake scheduler: a synthetic search
whose metric is 10*x + 0.1*y ranks x first, as text and as --json."""

from __future__ import annotations

import json
import random

import pytest

from pedl._metrics import to_struct
from pedl.cli.main import main
from pedl.config import carried, parse_experiment_config
from pedl.v1 import common_pb2, scheduler_pb2
from tests.unit.cli.fake_scheduler import Script, serve

CONFIG = """\
name: synthetic
searcher: {name: random, metric: loss, smaller_is_better: true, max_trials: 60, max_length: 100}
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
  y: {type: double, minval: 0, maxval: 1}
"""


def synthetic() -> scheduler_pb2.GetExperimentResponse:
    rng = random.Random(1)
    trials = []
    for i in range(1, 61):
        x, y = rng.random(), rng.random()
        t = scheduler_pb2.Trial(
            id=i, experiment_id=7, state=common_pb2.TRIAL_STATE_COMPLETED, hparams=to_struct({"x": x, "y": y})
        )
        t.best_validation_metric = 10 * x + 0.1 * y + rng.gauss(0, 0.01)
        trials.append(t)
    experiment = scheduler_pb2.Experiment(
        id=7, state=common_pb2.EXPERIMENT_STATE_COMPLETED, config_yaml=CONFIG, name="synthetic",
        config_document=carried.masked_json(parse_experiment_config(CONFIG)),
        searcher_metric="loss", smaller_is_better=True, num_trials=60,
    )  # fmt: skip
    return scheduler_pb2.GetExperimentResponse(experiment=experiment, trials=trials)


def test_describe_importance_ranks_x_first_as_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(Script(experiments=[synthetic()])) as address:
        assert main(["--master", address, "experiment", "describe", "7", "--importance"]) == 0
        out = capsys.readouterr().out
        table = out.split("Importance (PED-ANOVA, of the searcher metric):\n")[1].splitlines()
        assert table[0].split() == ["HYPERPARAMETER", "IMPORTANCE"] and table[2].split()[0] == "x"
        assert main(["--master", address, "experiment", "describe", "7", "--importance", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [i["name"] for i in data["importance"]] == ["x", "y"]
    assert data["importance"][0]["importance"] > 0.5 and data["experiment"]["name"] == "synthetic"


def test_the_web_uis_importance_view_ranks_x_first_and_leaves_masked_values_out() -> None:
    from pedl_webui import views

    response = synthetic()
    for t in response.trials:
        t.hparams.update({"api_key": "****"})
    view = views.importance_view(response)
    assert [i["name"] for i in view["importance"]] == ["x", "y"] and view["metric"] == "loss"
