"""Step results persisted per second through the scheduler's own recording path.

Drives ExperimentManager.on_workload_completed (the call AgentLink makes for every result
an agent reports) with real WorkloadResult messages for a running single-trial experiment,
on SQLite and on a throwaway PostgreSQL 15, and compares with the 10,000 results/s target.
No gRPC: a simulated agent answers each RunWorkload from the agent's outbox at once.

    .venv/bin/python benchmarks/results_ingest.py [--results 20000] [--backends sqlite postgresql]
        [--pg-url postgresql://...] [--pg-setting synchronous_commit=off] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.db import open_database
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from postgres import postgres_server  # noqa: E402

TARGET = 10_000
CONFIG = """
description: ingest benchmark
hyperparameters:
  learning_rate: 0.1
searcher:
  name: single
  metric: error
  smaller_is_better: true
  max_length:
    batches: {batches}
batches_per_step: 1
"""


@dataclass
class Run:
    steps: int
    recording_s: float  # time inside on_workload_completed for RUN_STEP results
    cpu_s: float  # the scheduler process's CPU time over the same calls: steadier on a busy machine
    wall_s: float  # the whole loop, simulated agent included


def result_for(workload: common_pb2.Workload, step_metrics: dict[str, float]) -> common_pb2.WorkloadResult:
    """What a harness would report for `workload`."""
    kind = KIND_NAMES[workload.kind]
    result = common_pb2.WorkloadResult(workload=workload, num_batches=1, num_inputs=32, duration_seconds=0.01)
    if kind is Kind.RUN_STEP:
        result.metrics.CopyFrom(to_struct(step_metrics))
    elif kind is Kind.COMPUTE_VALIDATION_METRICS:
        result.metrics.CopyFrom(to_struct({"error": 0.1, "validation_loss": 0.3}))
    elif kind is Kind.CHECKPOINT_MODEL:
        result.checkpoint.CopyFrom(
            common_pb2.Checkpoint(uuid=str(uuid.uuid4()), trial_id=workload.trial_id, total_batches=1)
        )
    return result


async def drive(manager: ExperimentManager, agent: AgentHandle) -> Run:
    """Plays the agent until the trial exits; times the RUN_STEP results."""
    steps, recording, cpu, start = 0, 0.0, 0.0, time.perf_counter()
    while not agent.outbox.empty():
        message = agent.outbox.get_nowait()
        if message.WhichOneof("message") != "run_workload":
            continue
        w = message.run_workload.workload
        if KIND_NAMES[w.kind] is Kind.TERMINATE:
            exited = agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id, exit_code=0)
            manager.on_trial_exited(agent, exited)
            continue
        result = result_for(w, {"loss": 1.0 / (w.step_id + 1), "accuracy": 0.5})
        t, c = time.perf_counter(), time.process_time()
        manager.on_workload_completed(agent, result)
        if KIND_NAMES[w.kind] is Kind.RUN_STEP:
            recording += time.perf_counter() - t
            cpu += time.process_time() - c
            steps += 1
        if steps % 256 == 0:
            await asyncio.sleep(0)  # let the change notifications run, as the event loop would
    await asyncio.sleep(0)
    return Run(steps, recording, cpu, time.perf_counter() - start)


async def ingest(url: str, results: int) -> Run:
    db = open_database(url)
    try:
        cluster = Cluster()
        agent = cluster.connect(
            agent_pb2.RegisterAgent(agent_id="bench", slots=[common_pb2.Slot(id="0", type="cpu")])
        )
        manager = ExperimentManager(db, cluster, "127.0.0.1:1")
        exp_id = manager.create_experiment(CONFIG.format(batches=results), b"model", "model")
        manager.schedule()
        run = await drive(manager, agent)
        state = db.query_one("SELECT state FROM experiments WHERE id = ?", (exp_id,))["state"]
        stored = db.query_one("SELECT COUNT(*) AS n FROM steps")["n"]
        if state != "COMPLETED" or stored != results:
            raise RuntimeError(f"experiment {state}, {stored} of {results} steps stored")
        return run
    finally:
        db.close()


@contextmanager
def backend_url(backend: str, pg_url: str, pg_settings: dict[str, str]) -> Iterator[str]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield str(Path(tmp) / "pedl.db")
    elif pg_url:
        yield pg_url
    else:
        with postgres_server(pg_settings) as server:
            yield server.url()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", type=int, default=20_000)
    p.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    p.add_argument("--pg-url", default="", help="use this (empty) database instead of starting PostgreSQL")
    p.add_argument("--pg-setting", action="append", default=[], help="name=value for the started server")
    p.add_argument("--profile", action="store_true", help="print the hottest functions of each run")
    args = p.parse_args()
    settings = dict(s.split("=", 1) for s in args.pg_setting)
    for backend in args.backends:
        with backend_url(backend, args.pg_url, settings) as url:
            profiler = cProfile.Profile() if args.profile else None
            with profiler or nullcontext():
                run = asyncio.run(ingest(url, args.results))
            rate = run.steps / run.recording_s
            print(
                f"{backend:10s} {run.steps} step results: {rate:,.0f} results/s recorded "
                f"({rate / TARGET:.2f}x the {TARGET:,}/s target); "
                f"{run.steps / run.wall_s:,.0f}/s with the simulated agent; "
                f"scheduler CPU {run.cpu_s / run.steps * 1e6:.0f} us/result"
            )
            if profiler is not None:
                pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
