"""Step results persisted per second through the scheduler's own recording path.

Feeds real WorkloadResult messages through the entry point AgentLink uses (`Inbox`, which hands
`ExperimentManager.on_agent_messages` everything that has arrived as one batch, one transaction),
from a simulated agent that answers every workload at once. `--trials` trials run concurrently, so a
batch holds what agent streams deliver while the previous commit runs: one result per running trial.
Persistence is on: every batch is a committed transaction (SQLite WAL with synchronous=NORMAL, as the
scheduler runs it; PostgreSQL 15 started here with its defaults, so each commit waits for its WAL
flush). For PostgreSQL, a plain psycopg loop on the same server measures the disk's own bound in
the same run: one row per commit, and rows per commit as many as the scheduler's batches hold.

    .venv/bin/python benchmarks/results_ingest.py [--results 20000] [--trials 16]
        [--backends sqlite postgresql] [--pg-url postgresql://...]
        [--pg-setting synchronous_commit=off] [--profile] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.agent_link import Batch, Inbox
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.postgres import postgres_server  # noqa: E402

TARGET = 10_000
CONFIG = """
description: ingest benchmark
hyperparameters:
  learning_rate: {{type: double, minval: 0.01, maxval: 0.1}}
searcher:
  name: random
  metric: error
  smaller_is_better: true
  max_trials: {trials}
  max_concurrent_trials: {trials}
  max_length:
    batches: {batches}
batches_per_step: 1
"""


@dataclass
class Run:
    results: int = 0
    steps: int = 0
    recording_s: float = 0.0  # time inside on_agent_messages
    cpu_s: float = 0.0  # the process's CPU time over the same calls: steadier on a busy machine
    wall_s: float = 0.0  # the whole loop, simulated agent included
    batch_sizes: list[int] = field(default_factory=list)


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


def answer(agent: AgentHandle, inbox: Inbox) -> int:
    """Plays the agent: answers every workload sent so far, in order; returns how many."""
    answered = 0
    while not agent.outbox.empty():
        message = agent.outbox.get_nowait()
        for m in message.batch.messages if message.WhichOneof("message") == "batch" else [message]:
            if m.WhichOneof("message") != "run_workload":
                continue
            w = m.run_workload.workload
            answered += 1
            if KIND_NAMES[w.kind] is Kind.TERMINATE:
                exited = agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id, exit_code=0)
                inbox.put(agent, agent_pb2.ConnectRequest(trial_exited=exited))
                continue
            result = result_for(w, {"loss": 1.0 / (w.step_id + 1), "accuracy": 0.5})
            completed = agent_pb2.WorkloadCompleted(result=result)
            inbox.put(agent, agent_pb2.ConnectRequest(workload_completed=completed))
    return answered


async def ingest(url: str, results: int, trials: int) -> Run:
    db = open_storage(url)
    try:
        cluster = Cluster()
        agent = cluster.connect(
            agent_pb2.RegisterAgent(
                agent_id="bench",
                slots=[common_pb2.Slot(id=str(i), type="cpu") for i in range(trials)],
                accepts_batches=True,
            )
        )
        manager = ExperimentManager(db, cluster, "127.0.0.1:1")
        # As the scheduler does once it has started (services/scheduler/main.py): what is loaded by
        # now is frozen, so full collections during the run do not walk the imported modules.
        gc.collect()
        gc.freeze()
        run = Run()

        def handle(batch: Batch) -> None:
            t, c = time.perf_counter(), time.process_time()
            manager.on_agent_messages(batch)
            run.recording_s += time.perf_counter() - t
            run.cpu_s += time.process_time() - c
            run.batch_sizes.append(len(batch))
            run.results += sum(1 for _, m in batch if m.WhichOneof("message") == "workload_completed")
            run.steps += sum(
                1
                for _, m in batch
                if m.WhichOneof("message") == "workload_completed"
                and m.workload_completed.result.workload.kind == common_pb2.WORKLOAD_KIND_RUN_STEP
            )

        inbox = Inbox(handle)
        exp_id = manager.create_experiment(CONFIG.format(trials=trials, batches=results // trials), b"m", "m")
        manager.tick(time.monotonic())
        start = time.perf_counter()
        while exp_id in manager.experiments:
            if not answer(agent, inbox):
                manager.tick(time.monotonic())
            await asyncio.sleep(0)  # the inbox handles what arrived, as the event loop would
        run.wall_s = time.perf_counter() - start
        state = experiment_ops.experiment_state(db, exp_id)
        stored = result_ops.step_count(db)
        expected = results // trials * trials
        if state != "COMPLETED" or stored != expected:
            raise RuntimeError(f"experiment {state}, {stored} of {expected} steps stored")
        return run
    finally:
        db.close()


def psycopg_baseline(url: str, rows: int, per_commit: int) -> float:
    """Rows/s a plain psycopg loop commits on this server: `per_commit` rows per transaction."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_rows (id BIGINT, payload TEXT)")
        conn.commit()
        payload = '{"loss": 0.5, "accuracy": 0.5}'
        start = time.perf_counter()
        with conn.cursor() as cur:
            for first in range(0, rows, per_commit):
                batch = [(i, payload) for i in range(first, min(first + per_commit, rows))]
                if len(batch) == 1:
                    cur.execute("INSERT INTO bench_rows VALUES (%s, %s)", batch[0])
                else:
                    cur.executemany("INSERT INTO bench_rows VALUES (%s, %s)", batch)
                conn.commit()
        elapsed = time.perf_counter() - start
        conn.execute("DROP TABLE bench_rows")
        conn.commit()
    return rows / elapsed


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
    p.add_argument("--trials", type=int, default=16, help="trials running at once (one agent slot each)")
    p.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    p.add_argument("--pg-url", default="", help="use this (empty) database instead of starting PostgreSQL")
    p.add_argument("--pg-setting", action="append", default=[], help="name=value for the started server")
    p.add_argument("--profile", action="store_true", help="print the hottest functions of each run")
    p.add_argument("--smoke", action="store_true", help="320 results on SQLite: checks the script runs")
    args = p.parse_args()
    if args.smoke:
        args.results, args.backends = 320, ["sqlite"]
    settings = dict(s.split("=", 1) for s in args.pg_setting)
    extra = f" ({', '.join(args.pg_setting)})" if args.pg_setting else ""
    for backend in args.backends:
        with backend_url(backend, args.pg_url, settings) as url:
            # The disk and the machine are shared: bracket the run with the plain loop's bound.
            plain = [pg_bound(url, args.trials)] if backend == "postgresql" else []
            profiler = cProfile.Profile() if args.profile else None
            with profiler or nullcontext():
                run = asyncio.run(ingest(url, args.results, args.trials))
            rate = run.results / run.recording_s
            name = backend + (extra if backend == "postgresql" else "")
            print(
                f"{name}: {run.results} results ({run.steps} steps) from {args.trials} concurrent trials: "
                f"{rate:,.0f} results/s recorded ({rate / TARGET:.2f}x the {TARGET:,}/s target), "
                f"{statistics.mean(run.batch_sizes):.1f} per batch (transaction); "
                f"{run.results / run.wall_s:,.0f}/s with the simulated agent; "
                f"scheduler CPU {run.cpu_s / run.results * 1e6:.0f} us/result",
                flush=True,
            )
            if profiler is not None:
                pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
            if plain:
                plain.append(pg_bound(url, args.trials))
                single = statistics.mean(p[0] for p in plain)
                batched = statistics.mean(p[1] for p in plain)
                print(
                    "  plain psycopg on the same server, before/after: "
                    f"{plain[0][0]:,.0f}/{plain[1][0]:,.0f} commits/s of one row (the fsync rate); "
                    f"{plain[0][1]:,.0f}/{plain[1][1]:,.0f} rows/s "
                    f"at {args.trials} rows per commit, of which the scheduler reached "
                    f"{rate / batched:.0%} (one row per commit: {rate / single:.1f}x)",
                    flush=True,
                )


def pg_bound(url: str, per_commit: int) -> tuple[float, float]:
    """(commits/s of one row, rows/s at `per_commit` rows per commit) of a plain psycopg loop."""
    return psycopg_baseline(url, 1000, 1), psycopg_baseline(url, max(2000, 200 * per_commit), per_commit)


if __name__ == "__main__":
    main()
