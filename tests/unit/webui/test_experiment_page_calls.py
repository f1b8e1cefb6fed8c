"""How many scheduler calls the experiment page's first paint makes (issue #43): its requests, as
experiment_start.js sends them at once, through the web UI's real Gateway to a scheduler stub that
counts each call and holds GetExperiment until every request that reads it has reached the gateway.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pedl.v1 import auth_pb2, common_pb2, scheduler_pb2
from pedl_webui import gateway as gateway_module
from pedl_webui.gateway import Gateway
from tests.unit.webui.test_server import request, serving

WAIT = 30.0
COOKIE = "pedl_session=tok-ann"
# The page's own HTML first (its id checked), then what experiment_start.js asks for together.
PAGE = "/experiments/1"
FIRST_PAINT = ("/api/experiments/1?columns=1", "/api/experiments/1/importance", "/api/me")
METRICS = "/api/experiments/1/metrics?max_points=200"
CONFIG = "searcher: {name: random, metric: loss, smaller_is_better: true, max_trials: 3}\n"


def _experiment() -> scheduler_pb2.GetExperimentResponse:
    exp = scheduler_pb2.Experiment(
        id=1,
        state=common_pb2.EXPERIMENT_STATE_ACTIVE,
        owner="ann",
        config_yaml=CONFIG,
        searcher_metric="loss",
    )
    trials = [
        scheduler_pb2.Trial(id=i, experiment_id=1, state=common_pb2.TRIAL_STATE_ACTIVE) for i in (1, 2, 3)
    ]
    return scheduler_pb2.GetExperimentResponse(experiment=exp, trials=trials)


class _Stream:
    """A metrics stream that says it has caught up, then ends."""

    def __iter__(self) -> Iterator[scheduler_pb2.GetMetricsResponse]:
        yield scheduler_pb2.GetMetricsResponse(caught_up=True)

    def cancel(self) -> None:
        pass


class CountingScheduler:
    """Counts each call by method; GetExperiment answers once `readers` requests wait on it."""

    def __init__(self, readers: Callable[[], int], expected_readers: int) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._readers, self._expected = readers, expected_readers

    def _count(self, method: str) -> None:
        with self._lock:
            self.calls[method] += 1

    def ListTrialDetails(self, request: Any, **_: Any) -> scheduler_pb2.ListTrialDetailsResponse:
        self._count("ListTrialDetails")
        return scheduler_pb2.ListTrialDetailsResponse()

    def GetExperiment(self, request: Any, **_: Any) -> scheduler_pb2.GetExperimentResponse:
        self._count("GetExperiment")
        deadline = time.monotonic() + WAIT
        while self._readers() < self._expected:  # both page requests in flight at once, as in a browser
            assert time.monotonic() < deadline, "the page's requests did not all reach the gateway"
            time.sleep(0.005)
        return _experiment()

    def GetMetrics(self, request: Any, **_: Any) -> _Stream:
        self._count("GetMetrics")
        return _Stream()


class CountingAuth:
    def __init__(self, calls: Counter[str]) -> None:
        self.calls = calls

    def WhoAmI(self, request: Any, **_: Any) -> auth_pb2.WhoAmIResponse:
        self.calls["WhoAmI"] += 1
        return auth_pb2.WhoAmIResponse(user=auth_pb2.User(username="ann"))


def first_paint_calls() -> Counter[str]:
    """The scheduler calls of one experiment page's first paint."""
    gateway = Gateway("127.0.0.1:1")  # never dialled: the stubs below answer

    def readers() -> int:  # GetExperiment callers: at the stub, plus those sharing a call in flight
        shared = sum(n - 1 for key, n in gateway.reads.in_flight().items() if key[1] == "GetExperiment")
        return scheduler.calls["GetExperiment"] + shared

    scheduler = CountingScheduler(readers, expected_readers=2)
    gateway.scheduler = scheduler  # type: ignore[assignment]
    gateway.auth = CountingAuth(scheduler.calls)  # type: ignore[assignment]
    with serving(gateway) as url:
        status, _, _ = request(url, PAGE, cookie=COOKIE)
        assert status == 200
        with ThreadPoolExecutor(len(FIRST_PAINT) + 1) as pool:
            answers = list(pool.map(lambda path: request(url, path, cookie=COOKIE), (*FIRST_PAINT, METRICS)))
    assert [a[0] for a in answers] == [200] * len(answers), [a[2][:200] for a in answers]
    return scheduler.calls


def test_the_experiment_page_reads_the_experiment_from_the_scheduler_once() -> None:
    calls = first_paint_calls()
    # Summary and importance share one GetExperiment (it was 2, each request its own: see below).
    assert calls == {"ListTrialDetails": 1, "GetExperiment": 1, "WhoAmI": 1, "GetMetrics": 1}


def test_without_sharing_the_same_requests_read_it_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count before issue #43's change, kept as the figure to compare against."""
    monkeypatch.setattr(gateway_module, "READS", frozenset())
    assert first_paint_calls() == {"ListTrialDetails": 1, "GetExperiment": 2, "WhoAmI": 1, "GetMetrics": 1}
