"""Bookkeeping cost of a large search: N no-op trials through the real scheduler and database.

Each trial trains one step that takes a fixed 100 ms on a simulated agent (no harness, no
model), reports one validation and a checkpoint reference, and exits. The simulated agents
speak the real agent protocol (register, batches) and run each trial's workloads one after the
other, in the order sent, as a harness does. With S slots the ideal wall time is N * 0.1 s / S;
the figure is the experiment's life as the scheduler records it (created_at to ended_at) over
the ideal (Ray Tune publishes 1.14 for 10,000 one-second trials on 16 CPUs; target <= 1.03).
The scheduler's CPU per trial, the steps' real duration, how many trials started as a handoff
(sent while the slot's run finished, started by the agent as it exited) and how long slots sat
idle between trials are printed with it.

By default every trial is created up front (`max_concurrent_trials: 0`), as a Ray Tune run without
a concurrency limit queues them; `--max-concurrent N` sets the limit (-1: the number of slots, where
no trial ever waits to take a slot over, so each start waits a scheduler round trip).

    .venv/bin/python benchmarks/search_bookkeeping.py --trials 2000 [--repeat 3]
        [--max-concurrent 0] [--db postgresql://...] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import datetime
import io
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pedl import _grpc
from pedl._metrics import to_struct
from pedl.v1 import agent_pb2, agent_pb2_grpc, common_pb2, scheduler_pb2, scheduler_pb2_grpc
from pedl_agent.version import AGENT_PROTOCOL

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


@dataclass
class SlotStats:
    """Starts, handoffs among them, and each handoff's wait from its slot's exit to its start."""

    starts: int = 0
    handoffs: int = 0
    idle: list[float] = field(default_factory=list)


class StepClock:
    """Runs simulated steps for exactly STEP_SECONDS, and records how long they really took.

    `asyncio.sleep` wakes up to a millisecond late (epoll's timeout is in whole milliseconds), which
    alone would add ~0.5% to every trial; a thread's `time.sleep` is precise to tens of microseconds.
    """

    def __init__(self, threads: int) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads)
        self.durations: list[float] = []

    async def step(self) -> None:
        started = time.perf_counter()
        await asyncio.get_running_loop().run_in_executor(self._pool, time.sleep, STEP_SECONDS)
        self.durations.append(time.perf_counter() - started)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


async def simulated_agent(
    master: str, agent_id: str, slots: int, done: asyncio.Event, clock: StepClock, stats: SlotStats
) -> None:
    """Answers the scheduler's workloads the way a harness would, without running anything: each
    run's workloads one after the other, in the order sent (the scheduler may queue several). A run
    started with `after` (a handoff) begins once those runs have exited, as pedl-agent does; the
    agent checks that no more steps than it has slots ever run at once."""
    outbox: asyncio.Queue = asyncio.Queue()
    runs: dict[tuple[int, int], asyncio.Queue] = {}
    ended: dict[tuple[int, int], asyncio.Event] = {}
    exited_at: dict[asyncio.Event, float] = {}
    stepping = [0]
    outbox.put_nowait(
        agent_pb2.ConnectRequest(
            register=agent_pb2.RegisterAgent(
                agent_id=agent_id,
                hostname=agent_id,
                address="127.0.0.1",
                environments=["default"],
                resource_pool="default",
                slots=[common_pb2.Slot(id=f"cpu{i}", type="cpu") for i in range(slots)],
                accepts_batches=True,
                accepts_handoffs=True,
                protocol=AGENT_PROTOCOL,
            )
        )
    )
    batches = [False]  # whether the scheduler accepts batch messages (as pedl-agent does)

    async def requests():
        while True:
            first = await outbox.get()
            if not batches[0] or outbox.empty():
                yield first
                continue
            messages = [first]
            while not outbox.empty():
                messages.append(outbox.get_nowait())
            yield agent_pb2.ConnectRequest(batch=agent_pb2.ConnectRequestBatch(messages=messages))

    async def harness(key: tuple[int, int], workloads: asyncio.Queue, after: list[asyncio.Event]) -> None:
        try:
            for event in after:
                await event.wait()
            if after:
                stats.idle.append(time.perf_counter() - max(exited_at[e] for e in after))
            while await answer(await workloads.get()):
                pass
        finally:
            del runs[key]
            event = ended.pop(key)
            exited_at[event] = time.perf_counter()
            event.set()

    def start(key: tuple[int, int], after: list[tuple[int, int]]) -> None:
        runs[key] = asyncio.Queue()
        ended[key] = asyncio.Event()
        waits = [ended[k] for k in after if k in ended]
        stats.starts += 1
        stats.handoffs += bool(waits)
        asyncio.get_running_loop().create_task(harness(key, runs[key], waits))

    async def answer(w: common_pb2.Workload) -> bool:
        result = common_pb2.WorkloadResult(workload=w)
        if w.kind == KIND.WORKLOAD_KIND_RUN_STEP:
            stepping[0] += 1
            assert stepping[0] <= slots, f"{agent_id} ran {stepping[0]} steps at once on {slots} slots"
            try:
                await clock.step()
            finally:
                stepping[0] -= 1
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
            return False
        outbox.put_nowait(
            agent_pb2.ConnectRequest(workload_completed=agent_pb2.WorkloadCompleted(result=result))
        )
        return True

    channel = _grpc.aio_channel(master)
    stream = agent_pb2_grpc.AgentLinkServiceStub(channel).Connect(requests())
    async for received in stream:
        kind = received.WhichOneof("message")
        if kind == "registered":
            batches[0] = received.registered.accepts_batches
        for message in received.batch.messages if kind == "batch" else [received]:
            what = message.WhichOneof("message")
            if what == "start_trial":
                st = message.start_trial
                start((st.trial_id, st.run_id), [(r.trial_id, r.run_id) for r in st.after])
            elif what == "run_workload":
                w = message.run_workload.workload
                runs[(w.trial_id, w.run_id)].put_nowait(w)
        if done.is_set():
            break
    await channel.close()


async def run(
    master: str, trials: int, agents: int, slots: int, max_concurrent: int, stats: SlotStats
) -> tuple[float, float, list[float]]:
    """(seconds the scheduler reports from creation to end, seconds the client saw, step durations)."""
    done = asyncio.Event()
    clock = StepClock(agents * slots)
    tasks = [
        asyncio.create_task(simulated_agent(master, f"sim{i}", slots, done, clock, stats))
        for i in range(agents)
    ]
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.aio_channel(master))
    while len((await stub.ListAgents(scheduler_pb2.ListAgentsRequest())).agents) < agents:
        await asyncio.sleep(0.05)
    config = (
        "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"
        f"searcher: {{name: random, metric: error, max_trials: {trials}, max_length: {{batches: 1}}, "
        f"max_concurrent_trials: {max_concurrent}}}\n"
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
    # ListExperiments, not GetExperiment: that lists every trial, and polling it would cost the
    # scheduler more CPU than the search itself by the end of a large run.
    while True:
        listed = (await stub.ListExperiments(scheduler_pb2.ListExperimentsRequest())).experiments
        state = next(e.state for e in listed if e.id == exp.id)
        if state != common_pb2.EXPERIMENT_STATE_ACTIVE:
            break
        await asyncio.sleep(0.1)
    elapsed = time.perf_counter() - start
    ended = next(e for e in listed if e.id == exp.id)
    span = (_parse_time(ended.ended_at) - _parse_time(ended.created_at)).total_seconds()
    assert state == common_pb2.EXPERIMENT_STATE_COMPLETED, common_pb2.ExperimentState.Name(state)
    done.set()
    for task in tasks:
        task.cancel()
    clock.close()
    return span, elapsed, clock.durations


def _idle(idle: list[float]) -> str:
    if not idle:
        return ""
    ranked = sorted(idle)
    return (
        f", slot idle between them {statistics.mean(ranked) * 1000:.2f} ms mean, "
        f"{ranked[len(ranked) * 99 // 100] * 1000:.2f} ms p99"
    )


def _parse_time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    span: float  # the experiment's life as the scheduler records it (created_at to ended_at)
    client: float  # from before CreateExperiment until the client saw it end (polled every 0.1 s)
    cpu: float  # the scheduler process's CPU seconds over the run
    steps: list[float]  # how long each simulated step really took
    slots: SlotStats


def one_run(args: argparse.Namespace) -> Result:
    """One search on a fresh scheduler (and, unless --db, a fresh SQLite database)."""
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
                "--metrics-port",
                "-1",
            ],
            start_new_session=True,
        )
        try:
            while not (Path(tmp) / "port").exists():
                time.sleep(0.05)
            cpu_before = cpu_seconds(scheduler.pid)
            slots = args.agents * args.slots_per_agent
            concurrent = slots if args.max_concurrent < 0 else args.max_concurrent
            stats = SlotStats()
            span, client, steps = asyncio.run(
                run(f"127.0.0.1:{port}", args.trials, args.agents, args.slots_per_agent, concurrent, stats)
            )
            cpu = cpu_seconds(scheduler.pid) - cpu_before
        finally:
            os.killpg(scheduler.pid, signal.SIGKILL)
            scheduler.wait()
    return Result(span, client, cpu, steps, stats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--slots-per-agent", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1, help="runs, each on a fresh scheduler and database")
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=0,
        help="the searcher's max_concurrent_trials (default 0: every trial created up front; -1: the slots)",
    )
    parser.add_argument("--db", default="", help="database URL (default: a fresh SQLite file per run)")
    parser.add_argument("--smoke", action="store_true", help="24 trials on 2x2 slots once: checks it runs")
    args = parser.parse_args()
    if args.smoke:
        args.trials, args.agents, args.slots_per_agent, args.repeat = 24, 2, 2, 1
    # The services refuse to start without a cluster secret; they and our clients share this one.
    os.environ.setdefault("PEDL_CLUSTER_SECRET", secrets.token_urlsafe(32))
    slots = args.agents * args.slots_per_agent
    ideal = args.trials * STEP_SECONDS / slots
    backend = "PostgreSQL" if args.db else "SQLite"
    limit = slots if args.max_concurrent < 0 else args.max_concurrent
    print(
        f"{args.trials} trials of {STEP_SECONDS * 1000:.0f} ms on {slots} slots ({backend}, "
        f"max_concurrent_trials {limit}), ideal {ideal:.2f} s"
    )
    ratios = []
    for _ in range(args.repeat):
        r = one_run(args)
        ratios.append(r.span / ideal)
        print(
            f"wall {r.span:.2f} s (client saw {r.client:.2f} s), ratio {r.span / ideal:.3f} "
            f"(target <= 1.03; Ray Tune 1.14); steps took {statistics.mean(r.steps) * 1000:.2f} ms; "
            f"scheduler CPU {r.cpu / args.trials * 1000:.2f} ms/trial "
            f"({r.cpu / r.span * 100:.0f}% of a core); {r.slots.handoffs} of {r.slots.starts} starts "
            f"were handoffs{_idle(r.slots.idle)}",
            flush=True,
        )
    best, median, worst = min(ratios), statistics.median(ratios), max(ratios)
    if len(ratios) > 1:
        print(f"ratio over {len(ratios)} runs: best {best:.3f}, median {median:.3f}, worst {worst:.3f}")
    print(
        f"extrapolated to 10,000 trials (median): {median * 10_000 * STEP_SECONDS / slots:.1f} s "
        f"(ideal {10_000 * STEP_SECONDS / slots:.1f} s)"
    )


if __name__ == "__main__":
    main()
