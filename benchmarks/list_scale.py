"""Do lists stay fast when the database is big? 100,000 experiments and one of 10,000 trials.

Writes them straight into a fresh SQLite database through the scheduler's storage operations (no
RPCs: minutes instead of hours), starts a real `pedl-scheduler` on it and times, as a user sees
them: the first page of `pedl experiment list` (the CLI's ListExperiments page), and `pedl
experiment describe` of the 10,000-trial experiment (the CLI command, in this process, output
discarded; once cold, then the median of warm runs); then the scheduler's resident memory.
Goals: first page < 200 ms, describe < 2 s.

    .venv/bin/python benchmarks/list_scale.py [--experiments 100000] [--trials 10000] [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _local_scheduler import start_scheduler

from pedl import _grpc
from pedl.cli.client import LIST_PAGE
from pedl.cli.main import main as cli
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops

BIN = Path(sys.executable).parent
GOAL_LIST_MS, GOAL_DESCRIBE_S = 200.0, 2.0
DAY2 = "2026-01-02T00:01:00Z"
CONFIG = {
    "description": "list_scale",
    "searcher": {"name": "random", "metric": "error", "max_trials": 1, "max_length": {"batches": 300}},
    "hyperparameters": {"lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10}, "layers": 3},
    "batches_per_step": 100,
    "resources": {"slots_per_trial": 1},
    "checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp/checkpoints"},
}


def populate(db: Path, experiments: int, trials: int) -> int:
    """`experiments` ended experiments; the last has `trials` trials of 3 steps, a validation and a
    checkpoint each. Returns the big experiment's id."""
    s = open_storage(str(db))
    config_json, config_yaml = json.dumps(CONFIG), "description: list_scale\n"
    common = dict(config_yaml=config_yaml, config_json=config_json, model_definition=b"m" * 1024,
                  model_definition_name="model", seed=1, owner="admin", state="COMPLETED")  # fmt: skip
    with s.transaction():
        for i in range(experiments - 1):
            experiment_ops.create_experiment(s, created_at=f"2026-01-01T00:00:{i % 60:02d}Z", **common)
        big = experiment_ops.create_experiment(s, created_at="2026-01-02T00:00:00Z", **common)
        for i in range(trials):
            trial_ops.create_trial(s, big, f"r{i}", json.dumps({"lr": 0.01, "layers": 3}), i, "{}")
    ids = sorted(r["id"] for r in trial_ops.newest_trials(s, big, trials))
    with s.transaction():
        for n, trial_id in enumerate(ids):
            for step in (1, 2, 3):
                metrics = json.dumps({"loss": 1.0 / (step + n), "accuracy": 0.5})
                result_ops.record_step(s, trial_id, step, step * 100, 100, metrics, DAY2)
            result_ops.record_validation(s, trial_id, 3, 300, json.dumps({"error": 0.1}), DAY2)
            record = json.dumps({"uuid": f"ckpt-{trial_id}", "trialId": trial_id, "totalBatches": 300})
            result_ops.record_checkpoint(s, f"ckpt-{trial_id}", trial_id, 3, 300, record, DAY2)
            trial_ops.end_trial(s, trial_id, "COMPLETED", "", DAY2)
    s.close()
    return big


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, repeats: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="1,000 experiments, 100 trials, 2 repeats")
    args = parser.parse_args()
    if args.smoke:
        args.experiments, args.trials, args.repeats = 1000, 100, 2
    with tempfile.TemporaryDirectory(prefix="pedl-list-scale-") as d:
        tmp = Path(d)
        start = time.perf_counter()
        big = populate(tmp / "pedl.db", args.experiments, args.trials)
        print(f"populated {args.experiments} experiments and {args.trials} trials in "
              f"{time.perf_counter() - start:.1f} s (storage layer, SQLite)")  # fmt: skip
        proc, master, token = start_scheduler(tmp, auth_file=tmp / "auth.json")
        try:
            os.environ.update(PEDL_MASTER=master, PEDL_TOKEN=token)
            stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(master, token=token))
            request = scheduler_pb2.ListExperimentsRequest(page_size=LIST_PAGE)
            page = stub.ListExperiments(request, timeout=60)
            assert len(page.experiments) == min(LIST_PAGE, args.experiments) and page.next_page_token
            list_s = timed(lambda: stub.ListExperiments(request, timeout=60), args.repeats)

            def describe() -> None:
                with contextlib.redirect_stdout(io.StringIO()):
                    assert cli(["experiment", "describe", str(big)]) == 0

            first_describe_s = timed(describe, 1)[0]  # cold: the scheduler's first read of those rows
            describe_s = timed(describe, max(1, args.repeats // 2))
            rss = rss_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
    list_ms = statistics.median(list_s) * 1000
    print(f"== list scale: {args.experiments} experiments, one of {args.trials} trials (SQLite)")
    print(f"experiment list, first page ({LIST_PAGE})  median {list_ms:8.1f} ms  "
          f"(goal < {GOAL_LIST_MS:.0f} ms)")  # fmt: skip
    print(f"experiment describe ({args.trials} trials)  median {statistics.median(describe_s):8.2f} s   "
          f"(goal < {GOAL_DESCRIBE_S:.0f} s)")  # fmt: skip
    print(f"experiment describe, first (cold)    {first_describe_s:8.2f} s")
    print(f"scheduler memory (RSS)              {rss:8.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
