"""Time from `experiment create` to the first step result on a warm local cluster.

Reported beside the harness's own `import torch` time, measured in the same run, since
that import is the floor no platform can beat. Target: latency - import <= 2 s.
Measured with the agent's bubblewrap sandbox (--isolation bwrap) and without it (--isolation
none), side by side: the sandbox's start cost (target well under 100 ms) is their difference.

    .venv/bin/python benchmarks/first_step_latency.py [--runs 5] [--smoke]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pedl import _grpc, auth
from pedl.cluster import processes
from pedl.cluster.launcher import _COMMANDS, UpOptions, down, up
from pedl.context import pack
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc

MODEL = """
import torch
from torch import nn
from pedl.pytorch import DataLoader, PyTorchTrial


class Tiny(PyTorchTrial):
    def build_model(self, hparams):
        return nn.Linear(8, 2)

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def losses(self, predictions, labels):
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self):
        return 16

    def validation_metrics(self, predictions, labels, losses):
        return {"error": (predictions.argmax(1) != labels).float().mean()}


def make_data_loaders(experiment_config, hparams):
    x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
    data = torch.utils.data.TensorDataset(x, y)
    return DataLoader(data, batch_size=16), DataLoader(data, batch_size=16)
"""

CONFIG = """
hyperparameters: {}
searcher: {name: single, metric: error, max_length: {batches: 2}}
batches_per_step: 1
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_import_seconds(runs: int = 3) -> float:
    """`import torch` in a fresh interpreter, less the interpreter's own start-up (best of `runs`)."""

    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    base = min(run("pass") for _ in range(runs))
    return min(run("import torch") for _ in range(runs)) - base


def first_step_seconds(stub: scheduler_pb2_grpc.SchedulerServiceStub, packed) -> float:
    start = time.perf_counter()
    exp = stub.CreateExperiment(
        scheduler_pb2.CreateExperimentRequest(
            config_yaml=CONFIG, model_definition=packed.data, model_definition_name=packed.name
        )
    ).experiment
    while True:
        trials = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp.id)).trials
        if trials and trials[0].num_steps > 0:
            elapsed = time.perf_counter() - start
            break
        time.sleep(0.005)
    while stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp.id)).experiment.state == 1:
        time.sleep(0.05)  # let it finish so runs don't overlap
    return elapsed


def sandbox_start_seconds(runs: int) -> tuple[float, float]:
    """Median extra time to start a no-op process inside the agent's sandbox (less noisy than the
    end-to-end difference on a busy machine): the previous deny-list view (the whole root read-only,
    the agent's paths covered) and the allow-list view trials get now, as the run's user."""
    from pedl_agent.sandbox import make_sandbox

    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / "work" / "trials" / "1-1"
        trial.mkdir(parents=True)
        sock = Path(tmp) / "work" / "sock"
        sock.mkdir()
        (sock / "1-1.sock").write_text("")
        sandbox = make_sandbox("bwrap", [Path(tmp) / "work"], False, harness_programs=[sys.executable])
        assert sandbox is not None
        wrapped = sandbox.wrap(["true"], trial, trial, sock / "1-1.sock")
        deny_list = [sandbox.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        deny_list += ["--tmpfs", str(Path(tmp) / "work"), "--bind", str(trial), str(trial)]
        deny_list += ["--cap-drop", "ALL", "--unshare-pid", "--die-with-parent", "--", "true"]

        def run(argv: list[str]) -> float:
            start = time.perf_counter()
            subprocess.run(argv, check=True)
            return time.perf_counter() - start

        plain = statistics.median(run(["true"]) for _ in range(runs))
        before = statistics.median(run(deny_list) for _ in range(runs)) - plain
        return before, statistics.median(run(wrapped) for _ in range(runs)) - plain


def latencies(isolation: str, runs: int, warm_up: bool) -> list[float]:
    """First-step times on a fresh local cluster whose agent runs harnesses with `--isolation`."""

    def command(kind: str) -> list[str]:
        argv = processes.service_command(*_COMMANDS[kind])
        return [*argv, "--isolation", isolation] if kind == "agent" else argv

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        model = home / "tiny"
        model.mkdir()
        (model / "__init__.py").write_text(MODEL)
        packed = pack(model)
        opts = UpOptions(
            home=home / "home", port=free_port(), store_port=free_port(), webui_port=0, command=command
        )
        state = up(opts, out=lambda _: None)
        try:
            # `up` logged this machine in as the admin, in the cluster's own auth.json.
            token = auth.load_logins(opts.home / "auth.json")[state.master]["token"]
            auth.configure_process(credential=token)
            stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(state.master))
            if warm_up:
                first_step_seconds(stub, packed)  # the first run pays for page cache and bytecode
            return [first_step_seconds(stub, packed) for _ in range(runs)]
        finally:
            down(home / "home", out=lambda _: None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one run each, no warm-up: checks it works")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    modes = ["bwrap", "none"] if shutil.which("bwrap") else ["none"]
    measured = {mode: latencies(mode, runs, warm_up=not args.smoke) for mode in modes}
    torch_import = torch_import_seconds(1 if args.smoke else 3)
    medians = {mode: statistics.median(xs) for mode, xs in measured.items()}
    for mode, xs in measured.items():
        print(
            f"create -> first step, --isolation {mode:5} (median of {runs}): {medians[mode]:.3f} s  (runs: "
            + ", ".join(f"{x:.2f}" for x in xs)
            + ")"
        )
    if "bwrap" in medians:
        cost = medians["bwrap"] - medians["none"]
        print(f"sandbox start cost (bwrap - none):       {cost * 1000:+.0f} ms  (end to end; noisy)")
        before, after = sandbox_start_seconds(5 if args.smoke else 50)
        print(f"sandbox start cost, no-op, deny-list:    {before * 1000:+.1f} ms  (before: / read-only)")
        print(f"sandbox start cost, no-op, allow-list:   {after * 1000:+.1f} ms  (target well under 100 ms)")
        print(f"ratio allow-list / deny-list: {after / before:.2f}")
    else:
        print("sandbox start cost: not measured (bubblewrap is not installed)")
    median = medians[modes[0]]
    print(f"harness `import torch`:                  {torch_import:.3f} s")
    print(f"beyond the import:                       {median - torch_import:.3f} s  (target <= 2.0 s)")
    print(f"ratio latency / import: {median / torch_import:.2f}")


if __name__ == "__main__":
    main()
