"""On a GPU machine, a trial's ranks that see no GPU still form their process group over gloo
(and ranks that see one choose NCCL). Skipped where torch sees no GPU."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

RANK = """
import json, os, torch, torch.distributed as dist
from pedl.harness.distributed import Launch, ProcessGroup, launch_from_env
from pedl.pytorch import _distributed

# One rank alone is no launch to the agent's environment; it still forms a group of one here.
launch = launch_from_env() or Launch(0, 0, 1, 1, "127.0.0.1", int(os.environ["MASTER_PORT"]))
group = ProcessGroup(launch)
group.start()
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = _distributed.wrap_model(torch.nn.Linear(4, 1).to(device), device)
model(torch.ones(2, 4, device=device)).sum().backward()
total = torch.tensor([float(dist.get_rank() + 1)], device=device)
dist.all_reduce(total)
print(json.dumps({"backend": dist.get_backend(), "sum": total.item(), "device": str(device)}), flush=True)
group.finish()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(visible: list[str]) -> list[dict]:
    port = free_port()
    procs = []
    for rank, cuda in enumerate(visible):
        env = {
            **os.environ,
            "CUDA_VISIBLE_DEVICES": cuda,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(len(visible)),
            "LOCAL_WORLD_SIZE": str(len(visible)),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        argv = [sys.executable, "-c", RANK]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True))
    try:
        outputs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), outputs
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


def test_two_cpu_ranks_on_a_gpu_machine_train_over_gloo() -> None:
    results = run_ranks(["", ""])
    assert [(r["backend"], r["sum"], r["device"]) for r in results] == [("gloo", 3.0, "cpu")] * 2


def test_a_rank_on_the_gpu_alone_chooses_nccl() -> None:
    from pedl_agent.devices import detect_gpus

    (result,) = run_ranks([detect_gpus()[0].uuid])
    assert (result["backend"], result["device"]) == ("nccl", "cuda")
