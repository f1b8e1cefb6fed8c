"""A downsampled curve draws what the full one shows: first, last, min and max points."""

import json
import math

from pedl_webui import downsample


def _rows(values: list[dict[str, float]]) -> list[str]:
    return [json.dumps(v) for v in values]


def test_a_short_curve_is_sent_whole() -> None:
    rows = _rows([{"loss": float(i)} for i in range(50)])
    assert downsample.keep(rows, 200) == list(range(50))


def test_a_long_curve_keeps_first_last_min_and_max_of_every_metric() -> None:
    values = [
        {"loss": math.sin(i / 37) + (5 if i == 4321 else 0), "acc": math.cos(i / 11)} for i in range(10_000)
    ]
    values[777]["acc"] = -9.0
    kept = downsample.keep(_rows(values), 200)
    assert len(kept) <= 200
    assert kept == sorted(set(kept))
    assert kept[0] == 0 and kept[-1] == 9_999
    for name in ("loss", "acc"):
        series = [v[name] for v in values]
        assert min(series) in [series[i] for i in kept]
        assert max(series) in [series[i] for i in kept]
    assert 4321 in kept and 777 in kept


def test_rows_without_numbers_still_keep_the_ends() -> None:
    rows = ['{"note": "x"}', "not json", *_rows([{"loss": 1.0}] * 500), '{"loss": NaN}']
    kept = downsample.keep(rows, 20)
    assert kept[0] == 0 and kept[-1] == len(rows) - 1
    assert len(kept) <= 20


def test_the_experiment_pages_event_bounds_each_curve_and_keeps_its_batches() -> None:
    from pedl.v1 import scheduler_pb2
    from pedl_webui import views

    errors = [1.0 / (1 + i) + (0.5 if i == 600 else 0.0) for i in range(1_000)]
    series = scheduler_pb2.MetricSeries(
        trial_id=7,
        kind=scheduler_pb2.METRIC_KIND_VALIDATION,
        total_batches=[100 * (i + 1) for i in range(1_000)],
        metrics_json=[json.dumps({"error": e}) for e in errors],
        end_time=["t"] * 1_000,
    )
    response = scheduler_pb2.GetMetricsResponse(series=[series], caught_up=True)
    [(trial, kind, batches, rows)] = json.loads(views.metrics_event(response, 100))["series"]
    assert (trial, kind) == (7, "v") and len(batches) == len(rows) <= 100
    assert batches[0] == 100 and batches[-1] == 100_000
    assert {"error": errors[600]} in rows and {"error": min(errors)} in rows
    assert all(rows[i] == {"error": errors[b // 100 - 1]} for i, b in enumerate(batches))
    whole = json.loads(views.metrics_event(response))["series"][0]
    assert len(whole[2]) == 1_000
