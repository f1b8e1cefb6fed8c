"""Data-parallel PyTorch trials on CPU: 2-slot gloo DDP vs 1 slot, and the harness's per-step overhead.

1. Scaling: samples/s of the trial's controller on 1 slot (one process, all cores) and on 2 slots
   (two gloo ranks, cores split between them as the agent's OMP_NUM_THREADS does); prints the ratio.
2. Overhead: on 2 ranks, the harness path (the chief's workload broadcast to the other rank,
   PyTorchTrialController.train_until with its metric reduction) vs a plain torch.distributed
   loop (DDP, DistributedSampler, the same model and data); prints the extra milliseconds per step.

Prints figures and never asserts (a 2-core machine shares its cores between the ranks).

    .venv/bin/python benchmarks/ddp_scaling.py [--steps 20] [--batches-per-step 25] [--batch-size 64]
        [--smoke]
"""

from __future__ import annotations

import argparse
import os
import pickle
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import TensorDataset

from pedl.harness.build import seed_all
from pedl.harness.distributed import Launch, ProcessGroup
from pedl.harness.workloads import run_workload
from pedl.pytorch import DataLoader, PyTorchTrial, PyTorchTrialController
from pedl.v1 import common_pb2

SAMPLES = 8192


class MlpTrial(PyTorchTrial):
    def build_model(self, hparams: dict[str, Any]) -> nn.Module:
        return nn.Sequential(
            nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def losses(self, predictions: Any, labels: Any) -> torch.Tensor:
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self) -> int:
        return self.hparams["batch_size"]

    def training_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        return {"accuracy": (predictions.argmax(1) == labels).float().mean()}

    def validation_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        return {"accuracy": (predictions.argmax(1) == labels).float().mean()}


def dataset() -> TensorDataset:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 64, generator=gen)
    return TensorDataset(x, (x[:, :10].argmax(1)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ListSource:
    """The chief's workloads, as the agent would hand them out."""

    def __init__(self, steps: int, per_step: int) -> None:
        self._workloads = [
            common_pb2.Workload(
                kind=common_pb2.WorkloadKind.WORKLOAD_KIND_RUN_STEP,
                step_id=i + 1,
                total_batches=(i + 1) * per_step,
            )
            for i in range(steps)
        ]

    def next_workload(self) -> common_pb2.Workload:
        return self._workloads.pop(0)

    def complete(self, result: common_pb2.WorkloadResult) -> None:
        pass


def harness_run(group: ProcessGroup | None, args: argparse.Namespace) -> tuple[float, int]:
    """(seconds, samples of all ranks) of `steps` RUN_STEP workloads after one warm-up step."""
    seed_all(1)
    loaders = (
        DataLoader(dataset(), batch_size=args.batch_size, shuffle=True),
        DataLoader(dataset(), batch_size=256),
    )
    controller = PyTorchTrialController(MlpTrial({"batch_size": args.batch_size}), *loaders)
    source: Any = ListSource(args.steps + 1, args.batches_per_step)
    if group is not None:
        source = group.workloads(source)
    run_workload(controller, source.next_workload(), None)  # type: ignore[arg-type]
    samples = 0
    start = time.perf_counter()
    for _ in range(args.steps):
        result = run_workload(controller, source.next_workload(), None)  # type: ignore[arg-type]
        source.complete(result)
        samples += result.num_inputs
    return time.perf_counter() - start, samples


def plain_run(args: argparse.Namespace) -> tuple[float, int]:
    """The same training as a hand-written DDP loop (after one warm-up step)."""
    seed_all(1)
    trial = MlpTrial({"batch_size": args.batch_size})
    data = dataset()
    sampler = torch.utils.data.DistributedSampler(data, shuffle=True, seed=1)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(trial.build_model(trial.hparams))
    optimizer = trial.optimizer(model)
    epoch, it = 0, iter(loader)

    def batch() -> Any:
        nonlocal epoch, it
        try:
            return next(it)
        except StopIteration:
            epoch += 1
            sampler.set_epoch(epoch)
            it = iter(loader)
            return next(it)

    def step() -> int:
        samples = 0
        losses = []
        for _ in range(args.batches_per_step):
            x, y = batch()
            samples += len(x)
            loss = trial.losses(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        mean = torch.stack(losses).mean()
        dist.all_reduce(mean)
        return samples * dist.get_world_size()

    step()
    samples = 0
    start = time.perf_counter()
    for _ in range(args.steps):
        samples += step()
    return time.perf_counter() - start, samples


def rank_main(rank: int, world: int, port: int, out: str, args: argparse.Namespace) -> None:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    results: dict[str, tuple[float, int]] = {}
    if world == 1:
        results["harness"] = harness_run(None, args)
    else:
        launch = Launch(rank, rank, world, world, "127.0.0.1", port)
        group = ProcessGroup(launch)
        group.start()
        results["harness"] = harness_run(group, args)
        results["plain"] = plain_run(args)
        group.finish()
    if rank == 0:
        Path(out).write_bytes(pickle.dumps(results))


def measure(world: int, args: argparse.Namespace) -> dict[str, tuple[float, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result")
        ctx = mp.start_processes(
            rank_main, args=(world, free_port(), out, args), nprocs=world, join=False, start_method="spawn"
        )
        try:
            while not ctx.join(timeout=5):
                pass
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
        return pickle.loads(Path(out).read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batches-per-step", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="2 short steps once: checks it runs")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.batches_per_step, args.batch_size, args.repeats = 2, 2, 16, 1
    print(
        f"MLP 64-512-512-10, batch {args.batch_size} per slot, {args.steps} steps of "
        f"{args.batches_per_step} batches, {os.cpu_count()} CPU cores, torch {torch.__version__}"
    )
    one, two = [], []
    for _ in range(args.repeats):
        one.append(measure(1, args))
        two.append(measure(2, args))
    rate = lambda r: r[1] / r[0]  # noqa: E731
    best1 = max(rate(r["harness"]) for r in one)
    best2 = max(rate(r["harness"]) for r in two)
    print(f"1 slot : {best1:10.0f} samples/s (best of {args.repeats})")
    print(f"2 slots: {best2:10.0f} samples/s (gloo DDP)  ratio 2/1 = {best2 / best1:.2f}")
    harness_s = min(r["harness"][0] for r in two) / args.steps
    plain_s = min(r["plain"][0] for r in two) / args.steps
    print(
        f"2 ranks, per step: harness {harness_s * 1e3:.2f} ms, plain DDP loop {plain_s * 1e3:.2f} ms, "
        f"overhead {(harness_s - plain_s) * 1e3:+.2f} ms/step ({(harness_s / plain_s - 1) * 100:+.1f}%)"
    )


if __name__ == "__main__":
    main()
