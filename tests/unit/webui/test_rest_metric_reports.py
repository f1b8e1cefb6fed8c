"""Determined's ReportTrialMetrics body and CompareTrials (`/api/v1/trials/time-series`) query as
pedl reads them, without a scheduler: what is sent on, what is refused with one 400 line, and how a
trial's rows become Determined's downsampled series."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pedl._metrics import from_struct
from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.metric_reports import report_request
from pedl_webui.rest.time_series import TimeSeriesQuery, downsampled

# As Determined 0.38.1's SDK sends it (bindings' to_json(omit_unset=True); unset optionals as null).
SENT = {
    "group": "validation",
    "metrics": {
        "metrics": {"avgMetrics": {"lossx": 3.3}, "batchMetrics": None},
        "trialId": 5,
        "trialRunId": 0,
        "stepsCompleted": 10,
        "reportTime": None,
    },
}


def test_determined_sdks_body_becomes_the_schedulers_request() -> None:
    message = report_request(5, SENT)
    assert message.trial_id == 5 and message.steps_completed == 10 and message.report_time == ""
    assert message.kind == scheduler_pb2.METRIC_KIND_VALIDATION
    assert from_struct(message.metrics) == {"lossx": 3.3}
    training = {**SENT, "group": "training"}
    assert report_request(5, training).kind == scheduler_pb2.METRIC_KIND_TRAINING
    custom = report_request(5, {**SENT, "group": "abc"})  # Determined's report_metrics(group="abc")
    assert (custom.kind, custom.group) == (scheduler_pb2.METRIC_KIND_UNSPECIFIED, "abc")


def _with(group: Any = "training", **trial: Any) -> dict[str, Any]:
    return {"group": group, "metrics": {**SENT["metrics"], **trial}}  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (_with("a.b"), "a metric group is 1-64 characters, no dot or control character, not 'a.b'"),
        (_with(None), 'give "group"'),
        (_with(stepsCompleted=None), "metrics.stepsCompleted is required"),
        (_with(stepsCompleted=-2), "metrics.stepsCompleted must be 0 or more"),
        (_with(stepsCompleted="ten"), 'field "stepsCompleted" must be an integer'),
        (_with(trialId=6), "metrics.trialId 6 is not the trial in the path (5)"),
        (_with(extra=1), 'unknown field "extra" in "metrics"'),
        (_with(metrics={"avgMetrics": {}}), "metrics.metrics.avgMetrics is required"),
        (_with(metrics={"avgMetrics": {"x": 1}, "batchMetrics": [{"x": 1}]}), "avgMetrics only"),
        (_with(metrics={"avg": {"x": 1}}), 'unknown field "avg" in "metrics.metrics"'),
        ({"group": "training"}, '"metrics" must be a JSON object'),
    ],
)
def test_bad_bodies_are_one_400_line(value: dict[str, Any], message: str) -> None:
    with pytest.raises(GatewayError) as info:
        report_request(5, value)
    assert info.value.status == 400
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_query_by_metric_ids_asks_each_group_for_its_names() -> None:
    query = TimeSeriesQuery.parse(
        {"trialIds": ["3", "4", "3"], "metricIds": ["validation.loss", "training.loss", "validation.acc"]}
    )
    assert query.trial_ids == [3, 4]
    assert query.groups == {"validation": ["loss", "acc"], "training": ["loss"]}
    assert query.asks() == [(scheduler_pb2.METRIC_KIND_UNSPECIFIED, "")]  # both groups in one read
    by_names = TimeSeriesQuery.parse(
        {"trialIds": ["3"], "metricNames": ["loss"], "metricType": ["METRIC_TYPE_VALIDATION"]}
    )
    assert by_names.groups == {"validation": ["loss"]}
    assert by_names.asks() == [(scheduler_pb2.METRIC_KIND_VALIDATION, "")]
    mixed = TimeSeriesQuery.parse({"trialIds": ["3"], "metricIds": ["abc.loss", "training.loss", "xyz.acc"]})
    assert mixed.groups == {"abc": ["loss"], "training": ["loss"], "xyz": ["acc"]}
    # training in one read, each custom group in its own
    unspecified = scheduler_pb2.METRIC_KIND_UNSPECIFIED
    assert mixed.asks() == [
        (scheduler_pb2.METRIC_KIND_TRAINING, ""),
        (unspecified, "abc"),
        (unspecified, "xyz"),
    ]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"metricIds": ["training.loss"]}, "give trialIds"),
        ({"trialIds": ["x"], "metricIds": ["training.loss"]}, "trialIds must be an integer"),
        ({"trialIds": ["1"]}, "give metricIds"),
        ({"trialIds": ["1"], "metricIds": ["loss"]}, "metricIds must be group.metric_name"),
        ({"trialIds": ["1"], "metricIds": [".loss"]}, 'give "group"'),
        ({"trialIds": ["1"], "group": ["a.b"]}, "a metric group is 1-64 characters"),
        ({"trialIds": ["1"], "metricNames": ["x"], "metricType": ["BOGUS"]}, "metricType must be"),
        ({"trialIds": ["1"], "group": ["training"], "maxDatapoints": ["-1"]}, "must be 0 or more"),
        ({"trialIds": ["1"], "group": ["training"], "timeSeriesFilter.name": ["x"]}, "filter time series"),
        ({"trialIds": ["1"], "group": ["training"], "bogus": ["x"]}, "unknown query parameter bogus"),
    ],
)
def test_bad_queries_are_one_400_line(params: dict[str, list[str]], message: str) -> None:
    with pytest.raises(GatewayError) as info:
        TimeSeriesQuery.parse(params)
    assert info.value.status == 400 and message in str(info.value)


def _series(kind: int, rows: list[tuple[int, dict[str, Any]]]) -> scheduler_pb2.MetricSeries:
    return scheduler_pb2.MetricSeries(
        trial_id=3,
        kind=kind,
        total_batches=[b for b, _ in rows],
        metrics_json=[json.dumps(m) for _, m in rows],
        end_time=[f"2025-01-01T00:00:0{i}Z" for i in range(len(rows))],
    )


def test_rows_become_determineds_downsampled_series_with_only_the_metrics_asked() -> None:
    query = TimeSeriesQuery.parse(
        {"trialIds": ["3"], "metricIds": ["validation.loss", "training.loss"], "endBatches": ["30"]}
    )
    series = [
        _series(scheduler_pb2.METRIC_KIND_TRAINING, [(10, {"loss": 2.0, "lr": 0.1}), (20, {"lr": 0.1})]),
        _series(scheduler_pb2.METRIC_KIND_VALIDATION, [(20, {"loss": 1.5, "acc": 0.7}), (40, {"loss": 1.0})]),
    ]
    assert downsampled(query, series) == [
        {
            "data": [{"batches": 20, "values": {"loss": 1.5}, "time": "2025-01-01T00:00:00Z"}],
            "type": "METRIC_TYPE_VALIDATION",
            "group": "validation",
        },
        {
            "data": [{"batches": 10, "values": {"loss": 2.0}, "time": "2025-01-01T00:00:00Z"}],
            "type": "METRIC_TYPE_TRAINING",
            "group": "training",
        },
    ]


def test_a_group_without_names_shows_all_its_metrics() -> None:
    query = TimeSeriesQuery.parse({"trialIds": ["3"], "group": ["training"]})
    rows = [(5, {"loss": 2.0, "lr": 0.1})]
    (only,) = downsampled(query, [_series(scheduler_pb2.METRIC_KIND_TRAINING, rows)])
    assert only["data"][0]["values"] == {"loss": 2.0, "lr": 0.1}
