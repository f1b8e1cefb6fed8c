"""Determined's `metrics-stream` endpoints (metric names, batches, trials snapshot, trials sample)
as its e2e test_streaming_metrics_api reads them: an empty first message while nothing is stored,
then each name, batch or row once, hparams typed by the config, and one 400 line for a query pedl
cannot answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pedl._metrics import to_struct
from pedl.config import carried
from pedl.config.experiment import parse_experiment_config
from pedl.v1 import auth_pb2, scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.metric_streams import (
    NAME_POINTS,
    MetricBatches,
    MetricNames,
    StreamQuery,
    TrialsSample,
    TrialsSnapshot,
)
from tests.unit.webui.test_server import request, serving

TRAINING, VALIDATION = scheduler_pb2.METRIC_KIND_TRAINING, scheduler_pb2.METRIC_KIND_VALIDATION
CONFIG = (
    "searcher: {name: single, metric: validation_loss, max_length: {batches: 400}}\n"
    "hyperparameters:\n"
    "  learning_rate: {type: double, minval: 0.1, maxval: 1.0}\n"
    "  n_filters1: {type: int, minval: 8, maxval: 64}\n"
)


def _series(trial: int, kind: int, rows: list[tuple[int, dict[str, Any]]]) -> scheduler_pb2.MetricSeries:
    return scheduler_pb2.MetricSeries(
        trial_id=trial,
        kind=kind,
        total_batches=[b for b, _ in rows],
        metrics_json=[json.dumps(m) for _, m in rows],
        end_time=[f"2026-01-01T00:00:{b // 100:02d}Z" for b, _ in rows],
    )


def _reply(*series: scheduler_pb2.MetricSeries, caught_up: bool = False) -> scheduler_pb2.GetMetricsResponse:
    return scheduler_pb2.GetMetricsResponse(series=series, caught_up=caught_up)


def _train(trial: int, batches: int, loss: float) -> scheduler_pb2.MetricSeries:
    return _series(trial, TRAINING, [(batches, {"loss": loss, "batches": batches})])


def _valid(trial: int, batches: int, loss: float) -> scheduler_pb2.MetricSeries:
    return _series(trial, VALIDATION, [(batches, {"validation_loss": loss, "accuracy": 1})])


def _query(endpoint: str, **params: str) -> StreamQuery:
    return StreamQuery.parse(endpoint, {k: [v] for k, v in params.items()}, 0 if endpoint == "names" else 3)


def test_metric_names_come_once_each_after_the_searcher_metric() -> None:
    view = MetricNames("validation_loss")
    first, news = view.message()
    assert first == {
        "searcherMetrics": ["validation_loss"],
        "trainingMetrics": [],
        "validationMetrics": [],
    } | {"metricNames": []}
    assert not news
    view.absorb(_reply(_train(1, 100, 2.0), _valid(1, 100, 1.0)), {})
    view.absorb(_reply(_train(2, 100, 2.0)), {})
    message, news = view.message()
    assert news and message["trainingMetrics"] == ["loss", "batches"]
    assert message["validationMetrics"] == ["validation_loss", "accuracy"]
    assert {"group": "validation", "name": "accuracy"} in message["metricNames"]
    view.absorb(_reply(_train(1, 200, 1.5)), {})
    assert view.message() == ({"searcherMetrics": ["validation_loss"]} | _empty_names(), False)


def _empty_names() -> dict[str, Any]:
    return {"trainingMetrics": [], "validationMetrics": [], "metricNames": []}


def test_batches_of_one_metric_in_one_group_come_once_each() -> None:
    view = MetricBatches(_query("batches", metric_name="accuracy", metric_type="METRIC_TYPE_VALIDATION"))
    view.absorb(_reply(_train(1, 100, 2.0), _valid(1, 100, 1.0), _valid(2, 100, 1.0)), {})
    assert view.message() == ({"batches": [100]}, True)
    view.absorb(_reply(_valid(1, 200, 0.5), _train(1, 300, 0.5)), {})
    assert view.message() == ({"batches": [200]}, True)
    assert view.message() == ({"batches": []}, False)


def test_a_snapshot_has_each_trials_metric_at_the_point_as_a_float_with_its_hparams() -> None:
    query = _query(
        "snapshot", metricName="loss", group="training", batchesProcessed="100", batchesMargin="10"
    )
    view = TrialsSnapshot(query)
    view.absorb(_reply(_train(1, 100, 2), _train(2, 105, 3.0), _train(3, 200, 1.0)), {1: {"lr": 0.5}, 2: {}})
    message, news = view.message()
    assert news and message["trials"] == [
        {"trialId": 1, "hparams": {"lr": 0.5}, "metric": 2.0, "batchesProcessed": 100},
        {"trialId": 2, "hparams": {}, "metric": 3.0, "batchesProcessed": 105},
    ]
    assert isinstance(message["trials"][0]["metric"], float)
    assert view.message() == ({"trials": []}, False)


def test_a_sample_promotes_the_best_trials_then_sends_only_their_new_points() -> None:
    query = _query("sample", metric_name="loss", metric_type="METRIC_TYPE_TRAINING", max_trials="2")
    view = TrialsSample(query, "validation_loss", smaller_is_better=True)
    assert view.message() == ({"trials": [], "promotedTrials": [], "demotedTrials": []}, False)
    hparams = {1: {"lr": 0.1}, 2: {"lr": 0.2}, 3: {"lr": 0.3}}
    view.absorb(_reply(_train(1, 100, 2.0), _train(2, 100, 2.5), _valid(1, 100, 0.9)), hparams)
    message, _ = view.message()
    assert message["promotedTrials"] == [1, 2] and message["demotedTrials"] == []
    assert message["trials"][0] == {
        "trialId": 1,
        "hparams": {"lr": 0.1},
        "data": [{"batches": 100, "values": {"loss": 2.0}, "time": "2026-01-01T00:00:01Z"}],
    }
    # trial 3 validates best: it is promoted and trial 2 (no validation yet) demoted
    view.absorb(_reply(_train(1, 200, 1.0), _train(3, 100, 3.0), _valid(3, 100, 0.1)), hparams)
    message, news = view.message()
    assert news and message["promotedTrials"] == [3] and message["demotedTrials"] == [2]
    by_trial = {t["trialId"]: t for t in message["trials"]}
    assert by_trial[1]["hparams"] is None and [p["batches"] for p in by_trial[1]["data"]] == [200]
    assert by_trial[3]["hparams"] == {"lr": 0.3}


def test_a_promoted_trials_history_is_cut_to_max_datapoints_keeping_its_last() -> None:
    query = _query("sample", metric_name="loss", group="training", max_datapoints="3")
    view = TrialsSample(query, "validation_loss", smaller_is_better=True)
    rows = [(b, {"loss": 1.0}) for b in range(10, 110, 10)]
    view.absorb(_reply(_series(1, TRAINING, rows)), {1: {}})
    message, _ = view.message()
    assert [p["batches"] for p in message["trials"][0]["data"]] == [10, 40, 100]


@pytest.mark.parametrize(
    ("endpoint", "params", "line"),
    [
        ("batches", {"metric_name": ["x"], "metric_type": ["METRIC_TYPE_PROFILING"]}, "no profiling"),
        ("batches", {"metric_name": ["x"]}, "give metric_type"),
        ("batches", {"metric_type": ["METRIC_TYPE_TRAINING"]}, "give metric_name"),
        ("batches", {"metric_name": ["x"], "group": ["abc"]}, "no custom metric groups"),
        ("batches", {"metric_name": ["x"], "group": ["training"], "max_trials": ["1"]}, "unknown query"),
        ("snapshot", {"metric_name": ["x"], "group": ["training"]}, "give batches_processed"),
        ("sample", {"metric_name": ["x"], "group": ["training"], "maxTrials": ["-1"]}, "0 or more"),
        ("sample", {"metric_name": ["x"], "group": ["training"], "period_seconds": ["z"]}, "an integer"),
    ],
)
def test_queries_pedl_cannot_answer_are_one_400_line(
    endpoint: str, params: dict[str, list[str]], line: str
) -> None:
    with pytest.raises(GatewayError) as refused:
        StreamQuery.parse(endpoint, params, 3)
    assert refused.value.status == 400 and line in str(refused.value) and "\n" not in str(refused.value)


def test_metric_names_take_one_experiment_in_ids() -> None:
    assert StreamQuery.parse("names", {"ids": ["4"], "period_seconds": ["1"]}).experiment_ids == [4]
    for ids in ([], ["4", "5"], ["x"]):
        with pytest.raises(GatewayError) as refused:
            StreamQuery.parse("names", {"ids": ids})
        assert refused.value.status == 400


class _Call:
    """A scheduler stream as the gateway hands it over: iterable, cancellable."""

    def __init__(self, replies: list[scheduler_pb2.GetMetricsResponse]) -> None:
        self.replies = iter(replies)

    def __iter__(self) -> Iterator[scheduler_pb2.GetMetricsResponse]:
        return self.replies

    def cancel(self) -> None:
        pass


ASKED: list[int] = []  # each GetMetrics stream's max_points, in order


class _Scheduler:
    """Experiment 3 (trials 1 and 2) as the scheduler answers it; its metrics stream has nothing
    stored yet, then each trial's rows, then it ends (the experiment ended)."""

    def whoami(self, token: str) -> auth_pb2.User | None:
        return auth_pb2.User(username="ann") if token == "tok" else None

    def call(self, token: str, method: str, message: Any) -> Any:
        assert token == "tok"
        if method == "GetExperiment":
            assert message.experiment_id == 3
            exp = scheduler_pb2.Experiment(
                id=3,
                config_yaml=CONFIG,
                config_document=carried.masked_json(parse_experiment_config(CONFIG)),
                searcher_metric="validation_loss",
                smaller_is_better=True,
            )
            return scheduler_pb2.GetExperimentResponse(experiment=exp)
        assert method == "GetTrial"
        hparams = to_struct({"learning_rate": 0.5 * message.trial_id, "n_filters1": 32.0})
        trial = scheduler_pb2.Trial(id=message.trial_id, experiment_id=3, hparams=hparams)
        return scheduler_pb2.GetTrialResponse(trial=trial)

    def stream(self, token: str, method: str, message: Any) -> _Call:
        assert (method, message.experiment_id, message.follow) == ("GetMetrics", 3, True)
        ASKED.append(message.max_points)
        return _Call(
            [
                _reply(caught_up=True),
                _reply(_train(1, 100, 2.0), _train(2, 100, 3.0)),
                _reply(_valid(1, 100, 0.5), _train(1, 200, 1.0)),
            ]
        )


@pytest.fixture
def url() -> Iterator[str]:
    with serving(_Scheduler()) as address:
        yield address


def _lines(url: str, path: str) -> list[dict[str, Any]]:
    status, _, body = request(url, path, cookie="pedl_session=tok")
    assert status == 200, body
    return [json.loads(line)["result"] for line in body.decode().splitlines()]


def test_the_streams_answer_as_determineds_e2e_test_reads_them(url: str) -> None:
    ASKED.clear()
    names = _lines(url, "/api/v1/experiments/metrics-stream/metric-names?ids=3&period_seconds=1")
    assert ASKED == [NAME_POINTS]  # the curves' cut, as the project's columns read names
    assert names[0] == {"searcherMetrics": ["validation_loss"]} | _empty_names()
    assert [n for r in names for n in r["trainingMetrics"]] == ["loss", "batches"]
    assert [n for r in names for n in r["validationMetrics"]] == ["validation_loss", "accuracy"]

    batches = _lines(url, "/api/v1/experiments/3/metrics-stream/batches?metric_name=loss&metric_type=1")
    assert batches == [{"batches": []}, {"batches": [100]}, {"batches": [200]}]

    query = "metric_name=loss&metric_type=METRIC_TYPE_TRAINING&batches_processed=100&period_seconds=1"
    snapshot = _lines(url, f"/api/v1/experiments/3/metrics-stream/trials-snapshot?{query}")
    assert snapshot[0] == {"trials": []}
    (second,) = snapshot[1:]
    assert [t["hparams"] for t in second["trials"]] == [
        {"learning_rate": 0.5, "n_filters1": 32},
        {"learning_rate": 1.0, "n_filters1": 32},
    ]
    assert isinstance(second["trials"][0]["hparams"]["n_filters1"], int)

    sample = _lines(url, "/api/v1/experiments/3/metrics-stream/trials-sample?metricName=loss&group=training")
    assert sample[0] == {"trials": [], "promotedTrials": [], "demotedTrials": []}
    assert sample[1]["promotedTrials"] == [1, 2]
    assert [p["batches"] for p in sample[2]["trials"][0]["data"]] == [200]
    assert ASKED[1:] == [0, 0, 0]  # the other streams: every row


def test_a_bad_query_is_a_400_in_determineds_error_shape(url: str) -> None:
    status, _, body = request(
        url, "/api/v1/experiments/3/metrics-stream/batches?metric_name=x&group=abc", cookie="pedl_session=tok"
    )
    assert status == 400 and "no custom metric groups" in json.loads(body)["message"]
