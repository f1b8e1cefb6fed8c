"""Creating a large search's trials up front: one experiment of N trials, all created at once.

A random search with `max_concurrent_trials: 0` asks for every trial in its first operations, so
`create_experiment` stores N trial rows (and the searcher's snapshot) in one transaction. Wall and
CPU time of that call, on a fresh database, median of --repeat runs.

    .venv/bin/python benchmarks/trial_creation.py [--trials 10000] [--repeat 3] [--db postgresql://...]
        [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import open_storage

CONFIG = """
description: trial creation benchmark
hyperparameters:
  learning_rate: {{type: double, minval: 0.01, maxval: 0.1}}
searcher:
  name: random
  metric: error
  smaller_is_better: true
  max_trials: {trials}
  max_concurrent_trials: 0
  max_length:
    batches: 100
"""


def one_run(trials: int, url: str) -> tuple[float, float]:
    manager = ExperimentManager(open_storage(url), Cluster(), "127.0.0.1:1")
    # As the scheduler does once it has started (services/scheduler/main.py): what is loaded by
    # now is frozen, so full collections during the call do not walk the imported modules.
    gc.collect()
    gc.freeze()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        manager.create_experiment(CONFIG.format(trials=trials), b"model", "model")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert len(manager.trials) == trials, len(manager.trials)
        return wall, cpu
    finally:
        manager.db.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--db", default="", help="an empty PostgreSQL database URL (default: a fresh SQLite file)")
    p.add_argument("--smoke", action="store_true", help="100 trials once: checks the script runs")
    args = p.parse_args()
    if args.smoke:
        args.trials, args.repeat = 100, 1
    if args.db and args.repeat > 1:
        sys.exit("--db runs once (the database must be empty): use --repeat 1")
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(one_run(args.trials, args.db or str(Path(tmp) / "pedl.db")))
    wall = statistics.median(w for w, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    backend = "PostgreSQL" if args.db else "SQLite"
    print(
        f"{backend}: {args.trials} trials created in {wall:.2f} s ({args.trials / wall:,.0f}/s), "
        f"CPU {cpu:.2f} s, median of {len(runs)}"
    )


if __name__ == "__main__":
    main()
