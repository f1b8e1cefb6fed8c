"""The scheduler's Prometheus metrics, served by prometheus_client's own HTTP server.

Counters are incremented where results are ingested (`step_ingested()` and friends); every
gauge is computed at scrape time from the ExperimentManager and Cluster, so no code path
has to remember to keep a gauge in sync. The scrape runs in the HTTP server's thread while
the state belongs to the event loop, so the snapshot is taken on the loop.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import grpc
import grpc.aio
import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import trials as trial_ops

log = structlog.get_logger(component="metrics")

TRIAL_STATES = ("ACTIVE", "PAUSED", "COMPLETED", "ERROR", "CANCELED")
EXPERIMENT_STATES = TRIAL_STATES
# RPCs include AgentLink.Connect and followed log streams, which last hours: keep long buckets.
_RPC_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600)

# Created unregistered: build_registry() adds them to each registry it makes.
STEP_RESULTS = Counter("pedl_step_results", "Training step results ingested", registry=None)
VALIDATION_RESULTS = Counter("pedl_validation_results", "Validation results ingested", registry=None)
CHECKPOINTS = Counter("pedl_checkpoints", "Checkpoints recorded", registry=None)
RPC_LATENCY = Histogram(
    "pedl_scheduler_rpc_duration_seconds",
    "Time spent serving each gRPC call (whole stream for streaming calls)",
    ["method", "code"],
    buckets=_RPC_BUCKETS,
    registry=None,
)


def step_ingested() -> None:
    STEP_RESULTS.inc()


def validation_ingested() -> None:
    VALIDATION_RESULTS.inc()


def checkpoint_recorded() -> None:
    CHECKPOINTS.inc()


# ---- gauges computed at scrape time ---------------------------------------------------------


@dataclass
class Snapshot:
    trials: dict[str, int] = field(default_factory=dict)
    experiments: dict[str, int] = field(default_factory=dict)
    trials_queued: int = 0
    trials_running: int = 0
    agents: dict[str, int] = field(default_factory=dict)  # per resource pool
    slots_total: dict[str, int] = field(default_factory=dict)
    slots_used: dict[str, int] = field(default_factory=dict)


def take_snapshot(manager: Any) -> Snapshot:
    """Reads the manager's state; must run on the thread that owns it (the event loop)."""
    snap = Snapshot()
    for counts, into, states in (
        (trial_ops.trial_state_counts(manager.db), snap.trials, TRIAL_STATES),
        (experiment_ops.experiment_state_counts(manager.db), snap.experiments, EXPERIMENT_STATES),
    ):
        into.update(dict.fromkeys(states, 0))
        into.update(counts)
    snap.trials_queued = len(manager.scheduling.cluster_state().queued)
    snap.trials_running = sum(1 for t in manager.trials.values() if t.running)
    agents, total, used = Tally[str](), Tally[str](), Tally[str]()
    for agent in manager.cluster.agents.values():
        agents[agent.resource_pool] += 1
        total[agent.resource_pool] += len(agent.slots)
        used[agent.resource_pool] += len(agent.used)
    snap.agents, snap.slots_total, snap.slots_used = dict(agents), dict(total), dict(used)
    return snap


class StateCollector(Collector):
    """Gauges of trials, experiments, agents and slots, read from the live state per scrape."""

    def __init__(self, manager: Any, loop: asyncio.AbstractEventLoop | None, timeout: float = 10.0) -> None:
        self.manager = manager
        self.loop = loop
        self.timeout = timeout

    def _snapshot(self) -> Snapshot:
        if self.loop is None or self.loop.is_closed() or _running_loop() is self.loop:
            return take_snapshot(self.manager)

        async def on_loop() -> Snapshot:
            return take_snapshot(self.manager)

        return asyncio.run_coroutine_threadsafe(on_loop(), self.loop).result(self.timeout)

    def collect(self) -> Iterator[Metric]:
        try:
            snap = self._snapshot()
        except Exception:
            # A scrape must not fail the scheduler; the counters and histograms still go out.
            log.exception("metrics snapshot failed")
            return
        yield _labelled("pedl_trials", "Trials by state", "state", snap.trials)
        yield _labelled("pedl_experiments", "Experiments by state", "state", snap.experiments)
        yield GaugeMetricFamily("pedl_trials_queued", "Trials waiting for slots", value=snap.trials_queued)
        yield GaugeMetricFamily("pedl_trials_running", "Trials placed on an agent", value=snap.trials_running)
        yield _labelled("pedl_agents_connected", "Connected agents", "resource_pool", snap.agents)
        yield _labelled("pedl_slots_total", "Slots offered by agents", "resource_pool", snap.slots_total)
        yield _labelled("pedl_slots_used", "Slots held by trials", "resource_pool", snap.slots_used)


def _labelled(name: str, doc: str, label: str, values: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# ---- RPC latency ------------------------------------------------------------------------------


def _status(context: Any, error: BaseException | None) -> str:
    if isinstance(error, asyncio.CancelledError):
        return "CANCELLED"
    try:
        code = context.code()
    except Exception:
        code = None
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):
        return next((c.name for c in grpc.StatusCode if c.value[0] == code), str(code))
    return "UNKNOWN" if error is not None else "OK"


def _observe(method: str, start: float, context: Any, error: BaseException | None) -> None:
    RPC_LATENCY.labels(method, _status(context, error)).observe(time.perf_counter() - start)


def _timed_unary(behavior: Callable, method: str) -> Callable:
    async def timed(request: Any, context: Any) -> Any:
        start, error = time.perf_counter(), None
        try:
            result = behavior(request, context)
            return await result if inspect.isawaitable(result) else result
        except BaseException as e:
            error = e
            raise
        finally:
            _observe(method, start, context, error)

    return timed


def _timed_stream(behavior: Callable, method: str) -> Callable:
    async def timed(request: Any, context: Any) -> Any:
        start, error = time.perf_counter(), None
        try:
            result = behavior(request, context)
            if hasattr(result, "__aiter__"):
                async for item in result:
                    yield item
            elif inspect.isawaitable(result):  # a handler that writes with context.write()
                await result
            elif result is not None:
                for item in result:
                    yield item
        except BaseException as e:
            error = e
            raise
        finally:
            _observe(method, start, context, error)

    return timed


class RpcMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Times every call into `pedl_scheduler_rpc_duration_seconds{method, code}`."""

    async def intercept_service(
        self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(_timed_unary(handler.unary_unary, method), **codec)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(_timed_unary(handler.stream_unary, method), **codec)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(_timed_stream(handler.unary_stream, method), **codec)
        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(
                _timed_stream(handler.stream_stream, method), **codec
            )
        return handler


# ---- serving --------------------------------------------------------------------------------


def build_registry(
    manager: Any, loop: asyncio.AbstractEventLoop | None, extra: Iterable[Collector] = ()
) -> CollectorRegistry:
    registry = CollectorRegistry()
    for collector in (STEP_RESULTS, VALIDATION_RESULTS, CHECKPOINTS, RPC_LATENCY, *extra):
        registry.register(collector)
    ProcessCollector(registry=registry)
    registry.register(StateCollector(manager, loop))
    return registry


def serve_metrics(
    manager: Any, host: str, port: int, token: str | None = None
) -> tuple[int, Callable[[], None]]:
    """Starts the /metrics HTTP server in a thread; returns the bound port and a stop function.

    With `token`, a scrape must send `Authorization: Bearer <token>` (Prometheus:
    `authorization: {credentials_file: ...}`); others get 401, so trials, which share the
    scheduler's host or network on a small cluster, cannot read it. Call from the event loop that
    owns `manager`. Raises OSError when the port is taken.
    """
    registry = build_registry(manager, asyncio.get_running_loop())
    app = make_wsgi_app(registry)
    if token is not None:
        app = _bearer_only(app, token)
    server, thread = _wsgi_server(host, port, app)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        if thread is not threading.current_thread():
            thread.join(timeout=5)

    return int(server.server_port), stop


def _bearer_only(app: Callable, token: str) -> Callable:
    expected = f"Bearer {token}".encode()

    def guarded(environ: dict[str, Any], start_response: Callable) -> Any:
        given = str(environ.get("HTTP_AUTHORIZATION", "")).encode()
        if hmac.compare_digest(given, expected):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")])
        return [b"/metrics needs Authorization: Bearer <the metrics token>\n"]

    return guarded


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Scrapes every few seconds are not worth a log line each."""


def _wsgi_server(host: str, port: int, app: Callable) -> tuple[Any, threading.Thread]:
    """prometheus_client's threading WSGI server on `host`:`port`."""
    server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="pedl-metrics")
    thread.start()
    return server, thread
