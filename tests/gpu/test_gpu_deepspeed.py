"""Determined's DeepSpeedTrial on CUDA through pedl's DeepSpeed controller, in DeepSpeed's own
environment (`scripts/install-deepspeed-env`): the ranks join over NCCL, ZeRO stage 3 partitions
parameters kept in fp16 or bf16, and a checkpoint resumes training where it left off. One rank per
GPU (NCCL refuses two ranks on one device), so one GPU runs a group of one and two GPUs a group of
two. Skipped unless that environment's torch (PyPI's CUDA build, not .venv's CPU one) sees a CUDA GPU."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

import pytest

from support.deepspeed_models import deepspeed_python, launch_ranks, write_model

# On each rank: NCCL as the default group (DeepSpeed's init_distributed keeps it), then per
# precision 3 batches of ZeRO-3, a checkpoint, 2 more; a fresh controller loads the checkpoint and
# trains the same 2. What each rank saw goes to <out>/<precision>-<rank>.json.
DRIVER = """
import json, os, sys
import torch
import torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
from pedl.harness.compat import ensure_determined_importable
ensure_determined_importable()
from pedl import _trial_context
_trial_context.set_experiment_config({})
sys.path.insert(0, sys.argv[1])
import model_def
out, rank = sys.argv[2], dist.get_rank()
for precision in sys.argv[3].split(","):
    hparams = {"lr": 0.1, "zero_stage": 3, "precision": precision}
    first = model_def.TinyDeepSpeedTrial.create_controller(hparams, None, "test")
    first.train_until(3)
    mine = os.path.join(out, precision, f"rank{rank}")
    os.makedirs(mine)
    first.save(mine)
    uninterrupted = float(first.train_until(5).metrics["loss"])
    engine = first.context.models[0]
    parameter = next(engine.module.parameters())
    dist.barrier()
    second = model_def.TinyDeepSpeedTrial.create_controller(hparams, None, "test")
    second.load(os.path.join(out, precision, "rank0"))
    resumed_at = second.batches_trained
    resumed = float(second.train_until(5).metrics["loss"])
    seen = {
        "backend": dist.get_backend(), "device": str(parameter.device), "dtype": str(parameter.dtype),
        "zero_stage": engine.zero_optimization_stage(), "world_size": dist.get_world_size(),
        "uninterrupted": uninterrupted, "resumed": resumed, "resumed_at": resumed_at,
    }
    with open(os.path.join(out, f"{precision}-{rank}.json"), "w") as f:
        json.dump(seen, f)
    dist.barrier()
"""

DTYPES = {"fp16": "torch.float16", "bf16": "torch.bfloat16"}


# What the DeepSpeed environment's torch sees, asked of its own interpreter: the one the ranks run.
PROBE = """
import json, torch
cuda = torch.cuda.is_available()
gpus = torch.cuda.device_count() if cuda else 0
bf16 = cuda and torch.cuda.is_bf16_supported()
print(json.dumps({"torch": torch.__version__, "cuda_build": torch.version.cuda, "gpus": gpus, "bf16": bf16}))
"""


@dataclass(frozen=True)
class Cuda:
    python: str
    gpus: int
    bf16: bool


@pytest.fixture(scope="module")
def cuda() -> Cuda:
    python, why = deepspeed_python()
    if python is None:
        pytest.skip(f"no DeepSpeed environment: {why}")
    done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    if not seen["gpus"]:
        pytest.skip(
            f"needs a CUDA GPU: the DeepSpeed environment's torch {seen['torch']} (CUDA build "
            f"{seen['cuda_build']}, {python}) sees none"
        )
    return Cuda(python, seen["gpus"], seen["bf16"])


@pytest.mark.timeout(600)
def test_zero3_in_fp16_and_bf16_over_nccl_trains_and_resumes_on_the_gpu(cuda: Cuda, tmp_path) -> None:
    ranks = min(2, cuda.gpus)
    precisions = [p for p in DTYPES if p != "bf16" or cuda.bf16]
    model = write_model(tmp_path / "ds")
    (tmp_path / "driver.py").write_text(DRIVER)
    out = tmp_path / "out"
    out.mkdir()
    # DeepSpeed picks its CUDA accelerator by itself where torch sees a GPU.
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}
    args = [str(model), str(out), ",".join(precisions)]
    code, output = launch_ranks(cuda.python, tmp_path / "driver.py", args, ranks, env)
    assert code == 0, output[-3000:]
    for precision in precisions:
        for rank in range(ranks):
            seen = json.loads((out / f"{precision}-{rank}.json").read_text())
            assert seen["backend"] == "nccl" and seen["world_size"] == ranks
            assert seen["device"].startswith("cuda") and seen["dtype"] == DTYPES[precision], seen
            assert seen["zero_stage"] == 3
            assert seen["resumed_at"] == 3
            # GPU kernels need not be bitwise repeatable; the resumed run follows the same losses.
            assert seen["resumed"] == pytest.approx(seen["uninterrupted"], rel=1e-2), (precision, seen)
        # Every rank's parameter and optimizer partitions (DeepSpeed names bf16's optimizer files
        # with a "bf16_" prefix).
        optim = "bf16_zero" if precision == "bf16" else "zero"
        stored = sorted(p.name for p in (out / precision / "rank0" / "model0").iterdir())
        assert stored == sorted(
            name
            for r in range(ranks)
            for name in (
                f"zero_pp_rank_{r}_mp_rank_00_model_states.pt",
                f"{optim}_pp_rank_{r}_mp_rank_00_optim_states.pt",
            )
        )
