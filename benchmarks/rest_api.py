"""Determined's REST API (`/api/v1`, served by pedl-webui) against the scheduler's gRPC API it calls.

Writes N experiments (the last with T trials) and L log lines of one trial straight into a fresh
SQLite database (benchmarks/list_scale.py's `populate`), starts a real `pedl-scheduler` and a real
`pedl-webui` on it, and times, as Determined's client asks them:
- the first page of `GET /api/v1/experiments?limit=100` vs gRPC `ListExperiments` (page of 100);
- `GET /api/v1/experiments/{id}/trials?limit=1000` of the T-trial experiment vs gRPC `ListTrialDetails`;
- `GET /api/v1/trials/{id}/logs?follow=true` (ndjson) lines/s vs gRPC `GetTrialLogs(follow)`.
Each figure is a median and its ratio against the gRPC figure measured in the same run.
Goals: first page < 200 ms, trials page < 1 s, logs >= 10,000 lines/s.

    .venv/bin/python benchmarks/rest_api.py [--experiments 100000] [--trials 1000] [--lines 100000] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _local_scheduler import start_scheduler
from list_scale import populate

from pedl import _grpc
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops

BIN = Path(sys.executable).parent
PAGE = 100
GOAL_LIST_MS, GOAL_TRIALS_S, GOAL_LINES = 200.0, 1.0, 10_000


def add_logs(db: Path, trial_id: int, lines: int) -> None:
    s = open_storage(str(db))
    with s.transaction():
        for i in range(lines):
            message = f'{{"event": "workload completed", "step_id": {i}, "seconds": 0.5}}\n'
            result_ops.record_log(s, trial_id, 1, "2026-01-02T00:01:00Z", "stdout", message)
    s.close()


def start_webui(master: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port_file = tmp / "webui.port"
    proc = subprocess.Popen(
        [str(BIN / "pedl-webui"), "--master", master, "--port", "0", "--port-file", str(port_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not port_file.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("pedl-webui did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port_file.read_text().strip()}"


def get(url: str, token: str) -> bytes:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return response.read()


def timed(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    """The median of `repeats` runs, seconds."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="500 experiments, 50 trials, 5,000 lines")
    args = parser.parse_args()
    if args.smoke:
        args.experiments, args.trials, args.lines, args.repeats = 500, 50, 5000, 2
    with tempfile.TemporaryDirectory(prefix="pedl-rest-api-") as d:
        tmp = Path(d)
        big = populate(tmp / "pedl.db", args.experiments, args.trials)
        s = open_storage(str(tmp / "pedl.db"))
        trial_id = min(r["id"] for r in trial_ops.newest_trials(s, big, args.trials))
        s.close()
        add_logs(tmp / "pedl.db", trial_id, args.lines)
        scheduler, master, token = start_scheduler(tmp, auth_file=tmp / "auth.json")
        webui, base = start_webui(master, tmp)
        try:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(master, token=token))
            first = json.loads(get(f"{base}/api/v1/experiments?limit={PAGE}&orderBy=ORDER_BY_DESC", token))
            assert len(first["experiments"]) == min(PAGE, args.experiments), first["pagination"]
            grpc_list = timed(
                lambda: stub.ListExperiments(
                    scheduler_pb2.ListExperimentsRequest(page_size=PAGE, newest_first=True)
                ),
                args.repeats,
            )
            rest_list = timed(
                lambda: get(f"{base}/api/v1/experiments?limit={PAGE}&orderBy=ORDER_BY_DESC", token),
                args.repeats,
            )
            trials = json.loads(get(f"{base}/api/v1/experiments/{big}/trials?limit=1000", token))
            assert len(trials["trials"]) == min(1000, args.trials)
            grpc_trials = timed(
                lambda: stub.ListTrialDetails(
                    scheduler_pb2.ListTrialDetailsRequest(experiment_id=big, limit=1000)
                ),
                args.repeats,
            )
            rest_trials = timed(
                lambda: get(f"{base}/api/v1/experiments/{big}/trials?limit=1000", token), args.repeats
            )

            def rest_logs() -> None:
                body = get(f"{base}/api/v1/trials/{trial_id}/logs?follow=true", token)
                assert body.count(b"\n") == args.lines

            def grpc_logs() -> None:
                request = scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id, follow=True)
                assert sum(len(r.lines) for r in stub.GetTrialLogs(request)) == args.lines

            grpc_lines = args.lines / timed(grpc_logs, max(1, args.repeats // 2))
            rest_lines = args.lines / timed(rest_logs, max(1, args.repeats // 2))
        finally:
            webui.terminate()
            scheduler.terminate()
            webui.wait(30)
            scheduler.wait(30)
    print(f"== REST API (pedl-webui) vs gRPC: {args.experiments} experiments, one of {args.trials} trials, "
          f"{args.lines} log lines (SQLite)")  # fmt: skip
    print(f"experiments, first page ({PAGE})   REST {rest_list * 1000:8.1f} ms  "
          f"gRPC {grpc_list * 1000:8.1f} ms  "
          f"ratio REST/gRPC {rest_list / grpc_list:6.2f}  (goal < {GOAL_LIST_MS:.0f} ms)")  # fmt: skip
    print(f"trials page ({min(1000, args.trials)} trials)        REST {rest_trials * 1000:8.1f} ms  "
          f"gRPC {grpc_trials * 1000:8.1f} ms  ratio REST/gRPC {rest_trials / grpc_trials:6.2f}  "
          f"(goal < {GOAL_TRIALS_S:.0f} s)")  # fmt: skip
    print(f"logs follow                       REST {rest_lines:8.0f} lines/s  "
          f"gRPC {grpc_lines:8.0f} lines/s  "
          f"ratio REST/gRPC {rest_lines / grpc_lines:6.2f}  (goal >= {GOAL_LINES} lines/s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
