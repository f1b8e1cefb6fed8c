"""The scheduler's Prometheus metrics: scrape-time gauges, ingest counters, RPC latency."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pedl import _grpc
from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler import metrics
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager
from pedl_scheduler.storage import open_storage
from support.models import tiny_config

MODEL = b"not really a tar.gz"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of an exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
def manager(tmp_path):
    cluster = Cluster()
    slots = [common_pb2.Slot(id="0"), common_pb2.Slot(id="1")]
    cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=slots))
    cluster.connect(agent_pb2.RegisterAgent(agent_id="g0", slots=slots[:1], resource_pool="gpu"))
    db = open_storage(str(tmp_path / "pedl.db"))
    yield ExperimentManager(db, cluster, "127.0.0.1:1")
    db.close()


def run_one_workload(manager: ExperimentManager, kind: Kind) -> None:
    """Answers the first queued workload of `kind` on agent a0 as a well-behaved agent would."""
    agent = manager.cluster.agents["a0"]
    while not agent.outbox.empty():
        message = agent.outbox.get_nowait()
        if message.WhichOneof("message") != "run_workload":
            continue
        w = message.run_workload.workload
        assert KIND_NAMES[w.kind] is kind
        result = common_pb2.WorkloadResult(workload=w, num_batches=10)
        result.metrics.CopyFrom(to_struct({"loss": 0.5}))
        manager.on_workload_completed(agent, result)
        return
    raise AssertionError(f"no {kind} workload was sent")


def test_gauges_follow_the_live_state_and_counters_count_ingested_steps(manager) -> None:
    async def scenario() -> None:
        registry = metrics.build_registry(manager, None)
        before = samples(generate_latest(registry).decode())
        assert before[("pedl_trials_queued", ())] == 0
        assert before[("pedl_trials", (("state", "ACTIVE"),))] == 0
        assert before[("pedl_agents_connected", (("resource_pool", "default"),))] == 1
        assert before[("pedl_agents_connected", (("resource_pool", "gpu"),))] == 1
        assert before[("pedl_slots_total", (("resource_pool", "default"),))] == 2
        assert before[("pedl_slots_used", (("resource_pool", "default"),))] == 0

        manager.create_experiment(tiny_config(max_batches=40), MODEL, "model")
        queued = samples(generate_latest(registry).decode())
        assert queued[("pedl_trials_queued", ())] == 1
        assert queued[("pedl_trials", (("state", "ACTIVE"),))] == 1
        assert queued[("pedl_experiments", (("state", "ACTIVE"),))] == 1

        manager.schedule()
        run_one_workload(manager, Kind.RUN_STEP)
        await asyncio.sleep(0)
        running = samples(generate_latest(registry).decode())
        assert running[("pedl_trials_queued", ())] == 0
        assert running[("pedl_trials_running", ())] == 1
        assert running[("pedl_slots_used", (("resource_pool", "default"),))] == 1
        assert running[("pedl_slots_used", (("resource_pool", "gpu"),))] == 0
        steps = ("pedl_step_results_total", ())
        assert running[steps] == before[steps] + 1

    asyncio.run(scenario())


def test_the_http_endpoint_snapshots_on_the_event_loop(manager) -> None:
    """The scrape thread hands the snapshot to the loop that owns the state."""

    async def scenario() -> str:
        manager.create_experiment(tiny_config(), MODEL, "model")
        port, stop = metrics.serve_metrics(manager, "127.0.0.1", 0)
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            return await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=30).read().decode())
        finally:
            stop()

    values = samples(asyncio.run(scenario()))
    assert values[("pedl_trials_queued", ())] == 1
    assert values[("pedl_experiments", (("state", "ACTIVE"),))] == 1
    assert ("process_cpu_seconds_total", ()) in values


def test_with_a_token_only_a_scrape_presenting_it_reads_the_metrics(manager) -> None:
    """Trials share the scheduler's host or network on a small cluster: /metrics is not theirs."""

    def get(url: str, authorization: str | None) -> tuple[int, str]:
        headers = {"Authorization": authorization} if authorization else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    async def scenario() -> list[tuple[int, str]]:
        port, stop = metrics.serve_metrics(manager, "127.0.0.1", 0, token="s3cret")
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            return [
                await asyncio.to_thread(get, url, auth)
                for auth in (None, "Bearer wrong", "Basic s3cret", "Bearer s3cret")
            ]
        finally:
            stop()

    *refused, (status, text) = asyncio.run(scenario())
    assert [code for code, _ in refused] == [401, 401, 401]
    assert all("pedl_" not in body for _, body in refused)
    assert status == 200 and "pedl_trials_queued" in text


def test_a_taken_port_is_an_os_error(manager) -> None:
    async def scenario() -> None:
        port, stop = metrics.serve_metrics(manager, "127.0.0.1", 0)
        try:
            with pytest.raises(OSError):
                metrics.serve_metrics(manager, "127.0.0.1", port)
        finally:
            stop()

    asyncio.run(scenario())


def _latency_counts() -> dict[tuple[str, str], float]:
    return {
        (s.labels["method"], s.labels["code"]): s.value
        for family in metrics.RPC_LATENCY.collect()
        for s in family.samples
        if s.name.endswith("_count")
    }


def test_the_interceptor_times_each_method_with_its_status_code() -> None:
    check = "/grpc.health.v1.Health/Check"
    reflect = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"

    async def scenario() -> None:
        server, port = _grpc.aio_server([], [], "127.0.0.1:0", interceptors=[metrics.RpcMetricsInterceptor()])
        await server.start()
        await _grpc.mark_serving(server)
        try:
            async with _grpc.aio_channel(f"127.0.0.1:{port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                await stub.Check(health_pb2.HealthCheckRequest(service=""))
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await stub.Check(health_pb2.HealthCheckRequest(service=f"missing-{uuid.uuid4()}"))
                assert e.value.code() == grpc.StatusCode.NOT_FOUND
                from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

                reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
                request = reflection_pb2.ServerReflectionRequest(list_services="")
                responses = [r async for r in reflection.ServerReflectionInfo(iter([request]))]
                assert responses and responses[0].list_services_response.service
        finally:
            await server.stop(grace=None)

    before = _latency_counts()
    asyncio.run(scenario())
    after = _latency_counts()
    assert after[(check, "OK")] == before.get((check, "OK"), 0) + 1
    assert after[(check, "NOT_FOUND")] == before.get((check, "NOT_FOUND"), 0) + 1
    assert after[(reflect, "OK")] == before.get((reflect, "OK"), 0) + 1
