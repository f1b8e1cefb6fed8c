"""Determined's `GET /api/v1/trials/metrics/trial_metrics` (its SDK's `iter_metrics`) ends once the
stored reports are sent, as Determined's master does, whatever the trial's state: a PAUSED trial's
stream used to follow until the trial ended, so Determined's `test_pause_and_nan_validations` hung."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.requests import Request

from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.trials import InTurn, trial_metrics

TRAINING = scheduler_pb2.METRIC_KIND_TRAINING


class _Call:
    """A finished scheduler stream: its messages, then its end."""

    def __init__(self, messages: list[scheduler_pb2.GetMetricsResponse]) -> None:
        self.messages = messages
        self.cancelled = False

    def __iter__(self) -> Any:
        return iter(self.messages)

    def cancel(self) -> None:
        self.cancelled = True


class _Gateway:
    """Answers each trial's GetMetrics with that trial's stored rows, `nan_of` rows of NaN loss."""

    def __init__(self) -> None:
        self.asked: list[scheduler_pb2.GetMetricsRequest] = []

    def stream(self, token: str, method: str, request: scheduler_pb2.GetMetricsRequest) -> _Call:
        assert (token, method) == ("tok", "GetMetrics")
        self.asked.append(request)
        series = scheduler_pb2.MetricSeries(
            trial_id=request.trial_id,
            kind=TRAINING,
            total_batches=[1, 2],
            metrics_json=['{"loss": NaN}', '{"loss": 0.5}'],
            end_time=["2026-01-01T00:00:00Z"] * 2,
            run_id=[1, 1],
        )
        caught_up = scheduler_pb2.GetMetricsResponse(caught_up=True)
        return _Call([scheduler_pb2.GetMetricsResponse(series=[series]), caught_up])


def _get(gateway: _Gateway, query: str) -> list[dict[str, Any]]:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/trials/metrics/trial_metrics",
        "headers": [(b"authorization", b"Bearer tok")],
        "query_string": query.encode(),
        "app": SimpleNamespace(state=SimpleNamespace(gateway=gateway)),
    }

    async def run() -> list[dict[str, Any]]:
        response = await trial_metrics(Request(scope))
        body = b"".join([chunk async for chunk in response.body_iterator])  # type: ignore[attr-defined]
        return [json.loads(line) for line in body.decode().splitlines()]

    return asyncio.run(run())


def test_the_stream_asks_for_stored_reports_only_and_ends() -> None:
    gateway = _Gateway()
    lines = _get(gateway, "trialIds=7&group=training")
    assert [r.follow for r in gateway.asked] == [False]
    reports = [m for line in lines for m in line["result"]["metrics"]]
    assert [(m["trialId"], m["totalBatches"]) for m in reports] == [(7, 1), (7, 2)]


def test_nan_metrics_read_back_as_determineds_gateway_spells_them() -> None:
    lines = _get(_Gateway(), "trialIds=7&group=training")
    first = lines[0]["result"]["metrics"][0]["metrics"]
    assert first == {"avg_metrics": {"loss": "NaN"}}


def test_several_trials_stream_one_after_another_in_id_order() -> None:
    gateway = _Gateway()
    lines = _get(gateway, "trialIds=9&trialIds=3&group=training")
    assert [r.trial_id for r in gateway.asked] == [3, 9]
    reports = [m for line in lines for m in line["result"]["metrics"]]
    assert [m["trialId"] for m in reports] == [3, 3, 9, 9]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("group=training", "must specify at least one trialId"),
        ("trialIds=7&trialIds=x&group=training", "trialIds must be trial ids, not 'x'"),
        ("trialIds=7&group=a.b", "a metric group is 1-64 characters"),
    ],
)
def test_bad_queries_are_refused_before_anything_streams(query: str, message: str) -> None:
    gateway = _Gateway()
    with pytest.raises(GatewayError) as e:
        _get(gateway, query)
    assert e.value.status == 400 and message in str(e.value)
    assert gateway.asked == []


def test_a_cancelled_turn_starts_no_further_stream() -> None:
    started: list[int] = []

    def start(key: int) -> _Call:
        started.append(key)
        return _Call([scheduler_pb2.GetMetricsResponse()])

    turns = InTurn(start, [1, 2, 3])
    stream = iter(turns)
    next(stream)
    turns.cancel()
    assert list(stream) == [] and started == [1]
