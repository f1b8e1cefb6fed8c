"""The SDK's metric histories: plain records from a GetMetrics stream, a DataFrame, bad arguments named."""

from __future__ import annotations

import builtins
import math

import pytest

from pedl.experimental import metrics
from pedl.v1 import scheduler_pb2


def responses() -> list[scheduler_pb2.GetMetricsResponse]:
    training = scheduler_pb2.MetricSeries(
        trial_id=1, kind=scheduler_pb2.METRIC_KIND_TRAINING, total_batches=[10, 20],
        metrics_json=['{"loss": 2}', '{"loss": 1.5}'], end_time=["t1", "t2"],
    )  # fmt: skip
    validation = scheduler_pb2.MetricSeries(
        trial_id=2, kind=scheduler_pb2.METRIC_KIND_VALIDATION, total_batches=[20],
        metrics_json=['{"error": NaN}'], end_time=[""],
    )  # fmt: skip
    return [
        scheduler_pb2.GetMetricsResponse(series=[training]),
        scheduler_pb2.GetMetricsResponse(series=[validation], caught_up=True),
    ]


def test_records_keep_the_trials_numbers_and_order() -> None:
    records = metrics.collect(responses())
    assert records[:2] == [
        {"trial_id": 1, "kind": "training", "total_batches": 10, "metrics": {"loss": 2}, "end_time": "t1"},
        {"trial_id": 1, "kind": "training", "total_batches": 20, "metrics": {"loss": 1.5}, "end_time": "t2"},
    ]
    assert records[2]["kind"] == "validation" and math.isnan(records[2]["metrics"]["error"])
    assert records[2]["end_time"] is None


def test_to_pandas_makes_a_column_per_metric() -> None:
    pytest.importorskip("pandas")
    frame = metrics.collect(responses()).to_pandas()
    assert list(frame.columns) == ["trial_id", "kind", "total_batches", "end_time", "error", "loss"]
    assert frame["loss"].tolist()[:2] == [2, 1.5] and len(frame) == 3


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_pandas(name: str, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match="pip install pandas"):
        metrics.collect(responses()).to_pandas()


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="kind must be 'training', 'validation', None"):
        metrics.request(trial_id=1, kind="a.b", from_batches=0)
    custom = metrics.request(trial_id=1, kind="abc", from_batches=0)  # a custom metric group
    assert (custom.group, custom.kind) == ("abc", scheduler_pb2.METRIC_KIND_UNSPECIFIED)
    with pytest.raises(ValueError, match="from_batches must be an integer >= 0"):
        metrics.request(trial_id=1, kind=None, from_batches=-5)
    request = metrics.request(experiment_id=4, kind="validation", from_batches=100)
    assert request.experiment_id == 4 and request.kind == scheduler_pb2.METRIC_KIND_VALIDATION
