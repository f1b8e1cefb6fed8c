"""Many short trials with real processes: pedl on a local cluster against Ray Tune, same machine, same run.

32 random-search trials of a PyTorchTrial whose every training batch sleeps 0.25 s (2 steps of 4
batches, then a validation and a checkpoint: 2 s of work per trial), no limit on concurrent trials,
on 1 agent with 2 and with 4 slots. Ideal is trials x 2 s / slots. Ray Tune runs the same work as a
class Trainable with one CPU per trial, once starting a new actor (process) per trial and once with
`reuse_actors=True`. pedl's per-phase medians come from the trials' timelines (`pedl trial describe`).

Ray lives in its own environment, `.cache/envs/raytune` (`ray[tune]` and torch, installed on first
use; never a dependency of pedl). Goal: pedl <= 1.05x ideal at 2 slots, <= 1.10x at 4.

    .venv/bin/python benchmarks/short_trials.py [--trials 32] [--slots 2 4] [--no-ray]
        [--ray-modes new reuse] [--cli] [--smoke]

--cli also times the search as a user runs it, beside the warm stub-driven run: a cluster just
started by `pedl cluster up` (free ports), from `pedl experiment create` to `pedl experiment wait`
returning, no warm-up ("fresh"), then the same search again on that cluster ("warm"), with the warm
search's phase medians. Issue #42's goals there: <= 1.10x ideal fresh, <= 1.05x warm.

Everything runs with byte-code caching on, as a user's install has it: PYTHONDONTWRITEBYTECODE, set
in some development shells, is dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pedl import _grpc, auth
from pedl.cluster.launcher import UpOptions, down, up
from pedl.context import pack
from pedl.timeline import phase_medians, timeline_records
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
RAY_ENV = ROOT / ".cache" / "envs" / "raytune"
RAY_REQUIREMENTS = ["ray[tune]==2.60.0", "torch==2.13.0"]

MODEL = """
import time

import torch
from torch import nn
from pedl.pytorch import DataLoader, PyTorchTrial

SLEEP = {sleep}


class Sleepy(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 2)

    def forward(self, x):
        if self.training:
            time.sleep(SLEEP)  # the "work" of one training batch
        return self.linear(x)


class ShortTrial(PyTorchTrial):
    def build_model(self, hparams):
        return Sleepy()

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=float(self.hparams["lr"]))

    def losses(self, predictions, labels):
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self):
        return 16

    def validation_metrics(self, predictions, labels, losses):
        return {{"error": (predictions.argmax(1) != labels).float().mean()}}


def make_data_loaders(experiment_config, hparams):
    x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
    data = torch.utils.data.TensorDataset(x, y)
    return DataLoader(data, batch_size=16), DataLoader(data, batch_size=16)
"""

CONFIG = """
hyperparameters: {{lr: {{type: double, minval: 0.01, maxval: 0.2}}}}
searcher:
  name: random
  metric: error
  max_trials: {trials}
  max_length: {{batches: {batches}}}
  max_concurrent_trials: 0
batches_per_step: {per_step}
max_restarts: 0
"""

# Run by the Ray environment's Python: argv = trials slots reuse(0/1) sleep steps batches_per_step.
RAY_SCRIPT = """
import json, os, sys, tempfile, time

import ray
from ray import tune

trials, slots, reuse = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
sleep, steps, per_step = float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])


class Sleepy(tune.Trainable):
    def setup(self, config):
        import torch

        self.torch = torch
        self.x, self.y = torch.randn(64, 8), torch.randint(0, 2, (64,))
        self.reset_config(config)

    def reset_config(self, new_config):
        torch = self.torch
        self.model = torch.nn.Linear(8, 2)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=new_config["lr"])
        return True

    def step(self):
        torch = self.torch
        for i in range(per_step):
            time.sleep(sleep)  # the "work" of one training batch
            x, y = self.x[i % 4 * 16 : i % 4 * 16 + 16], self.y[i % 4 * 16 : i % 4 * 16 + 16]
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        out = {"loss": float(loss)}
        if self.iteration + 1 >= steps:  # the validation, after the last step
            with torch.no_grad():
                out["error"] = float((self.model(self.x).argmax(1) != self.y).float().mean())
        return out

    def save_checkpoint(self, checkpoint_dir):
        self.torch.save(self.model.state_dict(), os.path.join(checkpoint_dir, "model.pt"))

    def load_checkpoint(self, checkpoint_dir):
        self.model.load_state_dict(self.torch.load(os.path.join(checkpoint_dir, "model.pt")))


RunConfig = getattr(tune, "RunConfig", None) or ray.train.RunConfig
CheckpointConfig = getattr(tune, "CheckpointConfig", None) or ray.train.CheckpointConfig
ray.init(num_cpus=slots, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
with tempfile.TemporaryDirectory() as storage:
    tuner = tune.Tuner(
        tune.with_resources(Sleepy, {"cpu": 1}),
        param_space={"lr": tune.uniform(0.01, 0.2)},
        tune_config=tune.TuneConfig(num_samples=trials, reuse_actors=reuse),
        run_config=RunConfig(
            stop={"training_iteration": steps},
            storage_path=storage,
            checkpoint_config=CheckpointConfig(checkpoint_at_end=True),
            verbose=0,
        ),
    )
    start = time.perf_counter()
    results = tuner.fit()
    wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "errors": results.num_errors, "trials": len(results)}))
"""


@dataclass(frozen=True)
class Workload:
    trials: int
    sleep: float  # seconds per training batch
    steps: int = 2
    per_step: int = 4

    def work_seconds(self) -> float:
        return self.sleep * self.steps * self.per_step

    def ideal(self, slots: int) -> float:
        return self.trials * self.work_seconds() / slots


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- pedl --------------------------------------------------------------------------------------


def _search(
    stub: scheduler_pb2_grpc.SchedulerServiceStub, packed, work: Workload, trials: int, extra: str = ""
) -> float:
    """Seconds from create to completed; `extra` is appended to the config (slurm_short_trials.py)."""
    config = CONFIG.format(trials=trials, batches=work.steps * work.per_step, per_step=work.per_step) + extra
    start = time.perf_counter()
    exp = stub.CreateExperiment(
        scheduler_pb2.CreateExperimentRequest(
            config_yaml=config, model_definition=packed.data, model_definition_name=packed.name
        )
    ).experiment
    while True:
        listed = stub.ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments
        state = next(e.state for e in listed if e.id == exp.id)
        if state != common_pb2.EXPERIMENT_STATE_ACTIVE:
            break
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    if state != common_pb2.EXPERIMENT_STATE_COMPLETED:
        raise SystemExit(f"pedl experiment {exp.id} ended {common_pb2.ExperimentState.Name(state)}")
    return elapsed


def _wait_for_fork_server(agent_log: Path, timeout: float = 300.0) -> None:
    """Until the agent's fork server has its imports done (it logs "fork server ready"); trials
    that come before then start new processes, as they would on a cluster just started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if agent_log.exists() and '"fork server ready"' in agent_log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    print(f"warning: no fork server ready after {timeout:.0f} s (see {agent_log})", flush=True)


def run_pedl(work: Workload, slots: int, warm_up: bool) -> tuple[float, dict[str, float]]:
    """(seconds from create to completed, median seconds per timeline phase) on a fresh local cluster."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        model = home / "short"
        model.mkdir()
        (model / "__init__.py").write_text(MODEL.format(sleep=work.sleep))
        packed = pack(model)
        opts = UpOptions(
            home=home / "home", slots_per_agent=slots, port=free_port(), store_port=free_port(), webui_port=0
        )
        state = up(opts, out=lambda _: None)
        try:
            token = auth.load_logins(opts.home / "auth.json")[state.master]["token"]
            auth.configure_process(credential=token)
            stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(state.master))
            if warm_up:  # page cache, bytecode and a ready fork server, as a cluster in use has them
                _search(stub, packed, work, slots)
                _wait_for_fork_server(opts.home / "cluster" / "agent-1.log")
            wall = _search(stub, packed, work, work.trials)
            exp_id = max(
                e.id for e in stub.ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments
            )
            trials = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
            runs = [
                timeline_records(stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=t.id)).timeline)
                for t in trials
            ]
            return wall, phase_medians(runs)
        finally:
            down(home / "home", out=lambda _: None)


# The `pedl` command of this interpreter's environment, as a user's shell finds it.
PEDL = str(Path(sys.executable).parent / "pedl")


def _pedl(env: dict[str, str], *argv: str) -> str:
    done = subprocess.run([PEDL, *argv], capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"pedl {' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@dataclass
class CliRun:
    """One `--cli` cluster's figures: how long `pedl cluster up` took, then two searches timed from
    `pedl experiment create` to `pedl experiment wait` returning, the first on the cluster just
    started and the second on the same cluster after it (page cache, bytecode, fork server warm)."""

    up: float
    fresh: float
    warm: float
    phases: dict[str, float]  # the warm search's per-trial timeline medians


def _cli_search(env: dict[str, str], config: Path, model: Path) -> tuple[float, str]:
    """(seconds from `pedl experiment create` to `pedl experiment wait` returning, experiment id)."""
    started = time.perf_counter()
    created = _pedl(env, "experiment", "create", str(config), str(model))
    exp_id = created.split("Created experiment ", 1)[1].split()[0]
    _pedl(env, "experiment", "wait", exp_id)
    return time.perf_counter() - started, exp_id


def _cli_phases(master: str, home: Path, exp_id: str) -> dict[str, float]:
    """The experiment's per-trial timeline medians, read through the scheduler's API."""
    token = auth.load_logins(home / "auth.json")[master]["token"]
    auth.configure_process(credential=token)
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(master))
    trials = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=int(exp_id))).trials
    runs = [
        timeline_records(stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=t.id)).timeline) for t in trials
    ]
    return phase_medians(runs)


def run_cli(work: Workload, slots: int) -> CliRun:
    """As a user runs it: `pedl cluster up`, a search with no warm-up, then the same search again."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        model = Path(tmp) / "short"
        model.mkdir()
        (model / "__init__.py").write_text(MODEL.format(sleep=work.sleep))
        config = Path(tmp) / "config.yaml"
        config.write_text(
            CONFIG.format(trials=work.trials, batches=work.steps * work.per_step, per_step=work.per_step)
        )
        port = free_port()
        master = f"127.0.0.1:{port}"
        env = {**os.environ, "PEDL_HOME": str(home), "PEDL_MASTER": master}
        env.pop("PEDL_TOKEN", None)
        started = time.perf_counter()
        _pedl(env, "cluster", "up", "--slots-per-agent", str(slots), "--port", str(port),
              "--store-port", str(free_port()), "--webui-port", "0", "--metrics-port", "-1")  # fmt: skip
        up_seconds = time.perf_counter() - started
        try:
            fresh, _ = _cli_search(env, config, model)
            warm, exp_id = _cli_search(env, config, model)
            phases = _cli_phases(master, home, exp_id)
        finally:
            subprocess.run([PEDL, "cluster", "down"], env=env, capture_output=True, timeout=300)
    return CliRun(up=up_seconds, fresh=fresh, warm=warm, phases=phases)


# --- Ray Tune ----------------------------------------------------------------------------------


def ray_python(install: bool) -> Path | None:
    """The Ray environment's interpreter, built on first use when `install`; None when absent."""
    python = RAY_ENV / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import ray.tune, torch"]).returncode == 0:
        return python
    if not install:
        return None
    print(f"installing {' '.join(RAY_REQUIREMENTS)} into {RAY_ENV} (once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(RAY_ENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *RAY_REQUIREMENTS], check=True)
    return python


def run_ray(python: Path, work: Workload, slots: int, reuse: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "ray_short_trials.py"
        script.write_text(RAY_SCRIPT)
        env = {**os.environ, "RAY_DEDUP_LOGS": "0", "PYTHONWARNINGS": "ignore"}
        env.pop("PYTHONPATH", None)
        argv = [str(python), str(script), str(work.trials), str(slots), "1" if reuse else "0"]
        argv += [str(work.sleep), str(work.steps), str(work.per_step)]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(
            f"Ray Tune run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["errors"]:
        raise SystemExit(f"Ray Tune: {result['errors']} of {result['trials']} trials failed")
    return float(result["wall"])


# --- report ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--slots", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--no-ray", action="store_true", help="pedl only")
    parser.add_argument(
        "--ray-modes",
        nargs="+",
        choices=["new", "reuse"],
        default=["new", "reuse"],
        help="which Ray Tune modes to run: a new process per trial, reuse_actors=True (default: both)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="4 trials of 10 ms batches on 2 slots, pedl only (with --ray, Ray too where already built)",
    )
    parser.add_argument(
        "--ray", action="store_true", help="with --smoke: Ray Tune too, if its environment exists"
    )
    parser.add_argument(
        "--cli",
        action="store_true",
        help="also as a user runs it: `pedl cluster up`, then create to `pedl experiment wait`, no warm-up",
    )
    args = parser.parse_args()
    # Byte-code caching on, as a user's installed pedl (and Ray) have it: pip compiles an install's
    # .pyc files. PYTHONDONTWRITEBYTECODE, set in some development shells, would have every CLI call
    # and every service compile pedl's sources again (benchmarks/cli_start.py drops it too).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Workload(trials=4, sleep=0.01) if args.smoke else Workload(trials=args.trials, sleep=0.25)
    slot_counts = [2] if args.smoke else args.slots
    skip_ray = args.no_ray or (args.smoke and not args.ray)
    python = None if skip_ray else ray_python(install=not args.smoke)
    print(
        f"== {work.trials} trials x {work.steps} steps of {work.per_step} batches of {work.sleep:g} s "
        f"({work.work_seconds():g} s of work each), random search, 1 agent"
    )
    if python is None:
        installed = (RAY_ENV / "bin" / "python").exists()
        why = (
            f"--no-ray{'' if installed else f'; not installed here ({RAY_ENV})'}"
            if args.no_ray
            else "--smoke without --ray"
            if skip_ray
            else f"no environment at {RAY_ENV} (a run without --smoke builds it)"
        )
        print(f"Ray Tune: skipped ({why})")
    medians: dict[int, dict[str, float]] = {}
    cli_medians: dict[int, dict[str, float]] = {}
    for slots in slot_counts:
        ideal = work.ideal(slots)
        wall, medians[slots] = run_pedl(work, slots, warm_up=not args.smoke)
        print(f"{slots} slots: ideal {ideal:.1f} s | pedl {wall:.1f} s ({wall / ideal:.2f}x)", flush=True)
        if args.cli:
            cli = run_cli(work, slots)
            print(
                f"{slots} slots: ideal {ideal:.1f} s | pedl CLI, fresh cluster {cli.fresh:.1f} s "
                f"({cli.fresh / ideal:.2f}x; `pedl cluster up` took {cli.up:.1f} s before it)",
                flush=True,
            )
            print(
                f"{slots} slots: ideal {ideal:.1f} s | pedl CLI, warm cluster {cli.warm:.1f} s "
                f"({cli.warm / ideal:.2f}x; the same search again on that cluster)",
                flush=True,
            )
            cli_medians[slots] = cli.phases
        if python is not None:
            modes = ((False, "new", "Ray new process"), (True, "reuse", "Ray reuse_actors"))
            for reuse, label in ((r, text) for r, mode, text in modes if mode in args.ray_modes):
                ray_wall = run_ray(python, work, slots, reuse)
                print(
                    f"{slots} slots: ideal {ideal:.1f} s | {label} {ray_wall:.1f} s "
                    f"({ray_wall / ideal:.2f}x)",
                    flush=True,
                )
    for label, runs in (("", medians), (", CLI warm search", cli_medians)):
        for slots, phases in runs.items():
            print(
                f"\npedl per-trial phase medians{label}, {slots} slots (seconds; from the trials' timelines):"
            )
            for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1]):
                print(f"  {name:42} {seconds:7.3f}")


if __name__ == "__main__":
    main()
