"""How long the CLI takes to answer commands that need no torch or TensorFlow, as a user runs them.

Starts a real `pedl-scheduler` (SQLite, authentication on, logged in as admin), then times, in
interleaved rounds, the `pedl` console script for `pedl --help`, `pedl version`, `pedl experiment
list` and `pedl experiment create` of a small search (it stays queued: no agents), each a new
process with its output discarded, against `python -c pass` in the same rounds: the interpreter's
own start, the floor under any command. With Determined's own client installed
(scripts/install-determined-client puts it under .cache/envs/determined-VERSION), `det --help` and
`det experiment list` (refused at once: nothing serves REST here, so it is det's start and one
refused connection) run in the same rounds. Prints each command's median and best wall time, its
median CPU time (user + system: what it costs when other work shares the cores, steadier than wall
time on a loaded machine) and the ratios of its median to `python -c pass`'s and to det's.
Goal (issue #42): each pedl command <= 0.3 s.

The commands run with byte-code caching on, as a user's do (pip compiles an install's .pyc files; an
editable install writes them on its first run): PYTHONDONTWRITEBYTECODE, set in some development
shells, is dropped, or every run would compile pedl's sources again.

    .venv/bin/python benchmarks/cli_start.py [--rounds 15] [--det PATH] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _local_scheduler import start_scheduler

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
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


def _time(argv: list[str], env: dict[str, str], expect_failure: bool = False) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `argv` (the children's usage counts each
    child once it is reaped: the scheduler, still running, is not in it)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if (done.returncode != 0) != expect_failure:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _det() -> Path | None:
    found = sorted((ROOT / ".cache" / "envs").glob("determined-*/bin/det"))
    return found[-1] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--det", help="Determined's `det` to time beside pedl (default: .cache/envs/determined-*)"
    )
    parser.add_argument("--smoke", action="store_true", help="2 rounds: check the code path, not the figure")
    args = parser.parse_args()
    rounds = 2 if args.smoke else args.rounds
    # Smoke mode checks pedl's code path: det only when named (it takes seconds a run).
    det = Path(args.det) if args.det else None if args.smoke else _det()

    with tempfile.TemporaryDirectory(prefix="pedl-cli-start-") as tmp_name:
        tmp = Path(tmp_name)
        home = tmp / "home"
        home.mkdir()
        env = dict(os.environ, PEDL_HOME=str(home))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        scheduler, master, _ = start_scheduler(tmp, auth_file=home / "auth.json")
        env["PEDL_MASTER"] = master
        env["DET_MASTER"] = "127.0.0.1:1"  # nothing listens: det's start and one refused connection
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
            if det is not None:
                argvs["det --help"] = [str(det), "--help"]
                argvs["det experiment list"] = [str(det), "experiment", "list"]
            failing = {"det experiment list"}
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in argvs}
            for name, argv in argvs.items():  # one unmeasured run each: the page cache, .pyc files
                _time(argv, env, name in failing)
            load_before = os.getloadavg()[0]
            for _ in range(rounds):
                for name, argv in argvs.items():
                    times[name].append(_time(argv, env, name in failing))
        finally:
            scheduler.kill()
            scheduler.wait()

    walls = {name: statistics.median(w for w, _ in samples) for name, samples in times.items()}
    base = walls["python -c pass"]
    det_base = walls.get("det experiment list")
    print(
        f"CLI start, {rounds} interleaved rounds, load {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after "
        f"(goal <= {GOAL_S} s each)"
    )
    for name, samples in times.items():
        cpu = statistics.median(c for _, c in samples)
        best = min(w for w, _ in samples)
        line = (
            f"  {name:24} median {walls[name]:.3f} s  best {best:.3f} s  cpu {cpu:.3f} s  "
            f"{walls[name] / base:.1f}x python -c pass"
        )
        if det_base:
            line += f"  {walls[name] / det_base:.2f}x det experiment list"
        print(line)
    if det is None:
        print(
            "  (no det: scripts/install-determined-client installs Determined's client to time beside pedl)"
        )


if __name__ == "__main__":
    main()
