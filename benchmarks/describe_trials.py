"""`det e describe ID --json` of an experiment with many trials, against a real scheduler.

Builds a SQLite database holding one experiment of N trials (each with 5 steps, a validation and
a checkpoint), starts `pedl-scheduler` on it, and times the CLI end to end (process start
included), next to the per-trial GetTrial loop the CLI used before ListTrialDetails.

    .venv/bin/python benchmarks/describe_trials.py [--trials 1000] [--repeat 3] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _local_scheduler import start_scheduler

from pedl import _grpc
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import results as result_ops

CONFIG = """
description: describe benchmark
hyperparameters:
  learning_rate: {{type: double, minval: 0.01, maxval: 0.1}}
  layers: {{type: int, minval: 1, maxval: 8}}
searcher:
  name: random
  metric: error
  smaller_is_better: true
  max_trials: {trials}
  max_concurrent_trials: 0
  max_length:
    batches: 100
"""
BIN = Path(sys.executable).parent


def build(db: Path, trials: int) -> int:
    manager = ExperimentManager(open_storage(str(db)), Cluster(), "127.0.0.1:1")
    try:
        exp_id = manager.create_experiment(CONFIG.format(trials=trials), b"model", "model")
        s = manager.db
        with s.transaction():
            for trial_id in list(manager.trials):
                for step in range(1, 6):
                    result_ops.record_step(s, trial_id, step, step * 20, 20, '{"loss": 0.5}', "t")
                result_ops.record_validation(s, trial_id, 5, 100, '{"error": 0.25}', "t")
                result_ops.record_checkpoint(s, f"ck-{trial_id}", trial_id, 5, 100, "{}", "t")
        manager.kill_experiment(exp_id)
        return exp_id
    finally:
        manager.db.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="50 trials once: checks the script runs")
    args = p.parse_args()
    if args.smoke:
        args.trials, args.repeat = 50, 1
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        exp_id = build(tmp / "pedl.db", args.trials)
        proc, master, token = start_scheduler(tmp)
        try:
            env = {**os.environ, "PEDL_MASTER": master, "PEDL_TOKEN": token, "PEDL_HOME": str(tmp / "home")}
            cli, per_trial = [], []
            for _ in range(args.repeat):
                start = time.perf_counter()
                out = subprocess.run([str(BIN / "det"), "e", "describe", str(exp_id), "--json"], env=env,
                                     capture_output=True, text=True, check=True).stdout  # fmt: skip
                cli.append(time.perf_counter() - start)
                assert out.count('"hparams"') == args.trials
                os.environ["PEDL_TOKEN"] = token
                with _grpc.channel(master) as channel:
                    stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
                    start = time.perf_counter()
                    trials = stub.GetExperiment(
                        scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)
                    ).trials
                    for t in trials:
                        stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=t.id))
                    per_trial.append(time.perf_counter() - start)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(
        f"{args.trials} trials: `det e describe --json` {statistics.median(cli):.2f} s end to end "
        f"(one paged ListTrialDetails); the old GetTrial-per-trial loop alone "
        f"{statistics.median(per_trial):.2f} s; median of {args.repeat}"
    )


if __name__ == "__main__":
    main()
