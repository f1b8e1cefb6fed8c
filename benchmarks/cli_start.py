"""How long the CLI takes to answer commands that need no torch or TensorFlow, as a user runs them.

Starts a real `pedl-scheduler` (SQLite, authentication on, logged in as admin), then times, in
interleaved rounds, the `pedl` console script for `pedl --help`, `pedl version`, `pedl experiment
list` and `pedl experiment create` of a small search (it stays queued: no agents), each a new
process with its output discarded, against `python -c pass` in the same rounds: the interpreter's
own start, the floor under any command. Prints each command's median and best in seconds and the
ratio of its median to the baseline's. Goal (issue #42): each <= 0.3 s.

    .venv/bin/python benchmarks/cli_start.py [--rounds 15] [--smoke]
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

BIN = Path(sys.executable).parent
GOAL_S = 0.3
COMMANDS = {
    "pedl --help": ["--help"],
    "pedl version": ["version"],
    "pedl experiment list": ["experiment", "list"],
}
CREATE_CONFIG = """
entrypoint: model:T
hyperparameters: {lr: {type: double, minval: 0.01, maxval: 0.2}}
searcher: {name: random, metric: error, max_trials: 2, max_length: {batches: 8}}
"""


def _time(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="2 rounds: check the code path, not the figure")
    args = parser.parse_args()
    rounds = 2 if args.smoke else args.rounds

    with tempfile.TemporaryDirectory(prefix="pedl-cli-start-") as tmp_name:
        tmp = Path(tmp_name)
        home = tmp / "home"
        home.mkdir()
        env = dict(os.environ, PEDL_HOME=str(home))
        scheduler, master, _ = start_scheduler(tmp, auth_file=home / "auth.json")
        env["PEDL_MASTER"] = master
        model = tmp / "model"
        model.mkdir()
        (model / "model.py").write_text(
            "from pedl.pytorch import PyTorchTrial\n\n\nclass T(PyTorchTrial):\n    pass\n"
        )
        (tmp / "config.yaml").write_text(CREATE_CONFIG)
        try:
            argvs = {"python -c pass": [sys.executable, "-c", "pass"]}
            argvs |= {name: [str(BIN / "pedl"), *words] for name, words in COMMANDS.items()}
            argvs["pedl experiment create"] = [
                str(BIN / "pedl"),
                "experiment",
                "create",
                str(tmp / "config.yaml"),
                str(model),
            ]
            times: dict[str, list[float]] = {name: [] for name in argvs}
            for argv in argvs.values():  # one unmeasured run each: the page cache, .pyc files
                _time(argv, env)
            for _ in range(rounds):
                for name, argv in argvs.items():
                    times[name].append(_time(argv, env))
        finally:
            scheduler.kill()
            scheduler.wait()

    base = statistics.median(times["python -c pass"])
    load = os.getloadavg()[0]
    print(f"CLI start, {rounds} interleaved rounds, load {load:.1f} (goal <= {GOAL_S} s each)")
    for name, samples in times.items():
        median = statistics.median(samples)
        best = min(samples)
        print(f"  {name:24} median {median:.3f} s  best {best:.3f} s  {median / base:.1f}x python -c pass")


if __name__ == "__main__":
    main()
