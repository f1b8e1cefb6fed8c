"""`det_ds.init()` and `det_ds.Trainer(trial, context).fit(...)`: Determined 0.38's DeepSpeed scripts.

The script builds its DeepSpeedTrial itself (as Determined's DCGAN example does) and runs under
`python3 -m determined.launch.deepspeed python3 SCRIPT`, one process per slot. `init()` joins the
slots' process group through DeepSpeed (gloo on CPUs, NCCL on GPUs) and hands out the context;
the Trainer is `det.pytorch.Trainer`'s loop and reporting (validations, checkpoints, the Core API)
driving pedl's DeepSpeed controller, the one a `--trial module:Class` entrypoint runs.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from typing import Any

from determined.pytorch._trainer import Trainer as PyTorchTrainer
from determined.pytorch._trainer import join_process_group, script_setup
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    seed: int | None = None,
    **unsupported: Any,
) -> Iterator[DeepSpeedTrialContext]:
    """A DeepSpeedTrialContext for a training script, its slots' process group started; inside a
    pedl trial, the trial's hparams and config."""
    setup = script_setup("det_ds.init()", hparams, exp_conf, seed, unsupported)
    _join_process_group()
    yield DeepSpeedTrialContext(*setup)


def _join_process_group() -> None:
    """Every slot's process meets through `deepspeed.init_distributed` (torchrun's environment,
    which pedl's agent sets). A script run alone (off a cluster) is a group of one on loopback, as
    `deepspeed.initialize` needs a group and would otherwise look for MPI."""
    import deepspeed
    import torch
    import torch.distributed as dist

    from determined.pytorch.deepspeed._controller import skip_shm_comm_op

    if dist.is_initialized():
        return
    if "RANK" not in os.environ:
        alone = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
        os.environ.update({**alone, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())})
    skip_shm_comm_op()
    if int(os.environ["WORLD_SIZE"]) <= 1:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False)
        return
    join_process_group(lambda backend: deepspeed.init_distributed(backend, auto_mpi_discovery=False))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Trainer(PyTorchTrainer):
    """`fit(max_length=..., validation_period=..., checkpoint_period=..., latest_checkpoint=..., ...)`
    as `det.pytorch.Trainer`'s; one batch is one optimizer step of the engines (their gradient
    accumulation steps' micro-batches)."""

    def __init__(self, trial: Any, context: DeepSpeedTrialContext | None = None) -> None:
        super().__init__(trial, context)  # type: ignore[arg-type]

    def _controller_for(self, trial: Any, context: Any) -> Any:
        from determined.pytorch.deepspeed._trial import deepspeed_controller

        return deepspeed_controller(trial, context)

    def _batches_per_epoch(self) -> int:
        """Micro-batches per epoch over those of one batch (drawn by pedl or by train_batch)."""
        return int(self._controller.batches_per_epoch())
