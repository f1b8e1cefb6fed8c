"""Bookkeeping cost of a large search: N no-op trials through the real scheduler and database.

Each trial trains one step that takes a fixed 100 ms on a simulated agent (no harness, no
model), reports one validation and a checkpoint reference, and exits. With S slots the ideal
wall time is N * 0.1 s / S; the figure is measured / ideal (Ray Tune publishes 1.14 for
10,000 one-second trials on 16 CPUs; target here <= 1.03).

    .venv/bin/python benchmarks/search_bookkeeping.py --trials 2000 [--db postgresql://...]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from pedl import _grpc
from pedl._metrics import to_struct
from pedl.v1 import agent_pb2, agent_pb2_grpc, common_pb2, scheduler_pb2, scheduler_pb2_grpc

STEP_SECONDS = 0.1
KIND = common_pb2.WorkloadKind


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_definition() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = b"# no-op\n"
        info = tarfile.TarInfo("__init__.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


async def simulated_agent(master: str, agent_id: str, slots: int, done: asyncio.Event) -> None:
    """Answers the scheduler's workloads the way a harness would, without running anything."""
    outbox: asyncio.Queue = asyncio.Queue()
    outbox.put_nowait(
        agent_pb2.ConnectRequest(
            register=agent_pb2.RegisterAgent(
                agent_id=agent_id,
                hostname=agent_id,
                address="127.0.0.1",
                environments=["default"],
                resource_pool="default",
                slots=[common_pb2.Slot(id=f"cpu{i}", type="cpu") for i in range(slots)],
            )
        )
    )

    async def requests():
        while True:
            yield await outbox.get()

    async def answer(w: common_pb2.Workload) -> None:
        result = common_pb2.WorkloadResult(workload=w)
        if w.kind == KIND.WORKLOAD_KIND_RUN_STEP:
            await asyncio.sleep(STEP_SECONDS)
            result.metrics.CopyFrom(to_struct({"loss": random.random()}))
            result.num_batches = 1
        elif w.kind == KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS:
            result.metrics.CopyFrom(to_struct({"error": random.random()}))
        elif w.kind == KIND.WORKLOAD_KIND_CHECKPOINT_MODEL:
            result.checkpoint.CopyFrom(
                common_pb2.Checkpoint(
                    uuid=str(uuid.uuid4()), trial_id=w.trial_id, total_batches=w.total_batches
                )
            )
        else:
            outbox.put_nowait(
                agent_pb2.ConnectRequest(
                    trial_exited=agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id, exit_code=0)
                )
            )
            return
        outbox.put_nowait(
            agent_pb2.ConnectRequest(workload_completed=agent_pb2.WorkloadCompleted(result=result))
        )

    channel = _grpc.aio_channel(master)
    stream = agent_pb2_grpc.AgentLinkServiceStub(channel).Connect(requests())
    async for message in stream:
        if message.WhichOneof("message") == "run_workload":
            asyncio.get_running_loop().create_task(answer(message.run_workload.workload))
        if done.is_set():
            break
    await channel.close()


async def run(master: str, trials: int, agents: int, slots: int) -> float:
    done = asyncio.Event()
    tasks = [asyncio.create_task(simulated_agent(master, f"sim{i}", slots, done)) for i in range(agents)]
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.aio_channel(master))
    while len((await stub.ListAgents(scheduler_pb2.ListAgentsRequest())).agents) < agents:
        await asyncio.sleep(0.05)
    config = (
        "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"
        f"searcher: {{name: random, metric: error, max_trials: {trials}, max_length: {{batches: 1}}, "
        f"max_concurrent_trials: {agents * slots}}}\n"
        "batches_per_step: 1\nmax_restarts: 0\n"
    )
    start = time.perf_counter()
    exp = (
        await stub.CreateExperiment(
            scheduler_pb2.CreateExperimentRequest(
                config_yaml=config, model_definition=model_definition(), model_definition_name="noop"
            )
        )
    ).experiment
    while True:
        state = (
            await stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp.id))
        ).experiment.state
        if state != common_pb2.EXPERIMENT_STATE_ACTIVE:
            break
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - start
    assert state == common_pb2.EXPERIMENT_STATE_COMPLETED, common_pb2.ExperimentState.Name(state)
    done.set()
    for task in tasks:
        task.cancel()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--slots-per-agent", type=int, default=4)
    parser.add_argument("--db", default="", help="database URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    # The services refuse to start without a cluster secret; they and our clients share this one.
    os.environ.setdefault("PEDL_CLUSTER_SECRET", secrets.token_urlsafe(32))
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        db = args.db or str(Path(tmp) / "pedl.db")
        scheduler = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "pedl-scheduler"),
                "--port",
                str(port),
                "--db",
                db,
                "--port-file",
                str(Path(tmp) / "port"),
                "--log-level",
                "warning",
            ],
            start_new_session=True,
        )
        try:
            while not (Path(tmp) / "port").exists():
                time.sleep(0.05)
            elapsed = asyncio.run(run(f"127.0.0.1:{port}", args.trials, args.agents, args.slots_per_agent))
        finally:
            os.killpg(scheduler.pid, signal.SIGKILL)
            scheduler.wait()
    slots = args.agents * args.slots_per_agent
    ideal = args.trials * STEP_SECONDS / slots
    backend = "PostgreSQL" if args.db else "SQLite"
    print(f"{args.trials} trials of {STEP_SECONDS * 1000:.0f} ms on {slots} slots ({backend})")
    print(
        f"wall {elapsed:.2f} s, ideal {ideal:.2f} s, ratio {elapsed / ideal:.3f} "
        "(target <= 1.03; Ray Tune 1.14)"
    )
    print(
        f"extrapolated to 10,000 trials: {elapsed / args.trials * 10_000:.0f} s "
        f"(ideal {10_000 * STEP_SECONDS / slots:.1f} s)"
    )


if __name__ == "__main__":
    main()
