"""Time from `experiment create` to the first step result on a warm local cluster.

Reported beside the harness's own `import torch` time, measured in the same run, since
that import is the floor no platform can beat. Target: latency - import <= 2 s.

    .venv/bin/python benchmarks/first_step_latency.py [--runs 5]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pedl import _grpc
from pedl.cluster.launcher import UpOptions, down, up
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


def torch_import_seconds() -> float:
    """`import torch` in a fresh interpreter, less the interpreter's own start-up."""

    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    base = min(run("pass") for _ in range(3))
    return min(run("import torch") for _ in range(3)) - base


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        model = home / "tiny"
        model.mkdir()
        (model / "__init__.py").write_text(MODEL)
        packed = pack(model)
        state = up(
            UpOptions(home=home / "home", port=free_port(), store_port=free_port()), out=lambda _: None
        )
        try:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(state.master))
            first_step_seconds(stub, packed)  # warm-up: first run pays for page cache and bytecode
            latencies = [first_step_seconds(stub, packed) for _ in range(args.runs)]
        finally:
            down(home / "home", out=lambda _: None)
    torch_import = torch_import_seconds()
    median = statistics.median(latencies)
    print(
        f"create -> first step (median of {args.runs}): {median:.3f} s  (runs: "
        + ", ".join(f"{x:.2f}" for x in latencies)
        + ")"
    )
    print(f"harness `import torch`:                  {torch_import:.3f} s")
    print(f"beyond the import:                       {median - torch_import:.3f} s  (target <= 2.0 s)")
    print(f"ratio latency / import: {median / torch_import:.2f}")


if __name__ == "__main__":
    main()
