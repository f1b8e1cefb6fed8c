"""What a trial's harness processes find in their environment: the agent's own (minus its secrets),
the experiment's environment_variables, pedl's trial and rank variables, the visible GPUs, and each
run's share of the CPU cores."""

from __future__ import annotations

import os
from pathlib import Path

from pedl.config import ExperimentConfig
from pedl.harness.process_limits import PIDS_LIMIT_ENV
from pedl.harness.store_retry import BUDGET_ENV
from pedl.v1 import agent_pb2

from .credentials import harness_credentials, harness_environment
from .devices import cuda_visible_devices
from .ranks import DISTRIBUTED_ENV, Ranks
from .run_settings import RunSettings


def run_environment(
    start: agent_pb2.StartTrial,
    config: ExperimentConfig | None,
    settings: RunSettings,
    r: Ranks,
    trial_dir: Path,
    socket_path: Path,
    index: int = 0,
) -> dict[str, str]:
    """The environment of the run's harness process `index` (its rank on this agent). `config` is the
    run's, decoded once from StartTrial.config_json (None: it did not decode, and the harness refuses it)."""
    env = harness_environment(os.environ, trial_dir, DISTRIBUTED_ENV)
    slots = list(start.slot_ids)
    on_gpu = cuda_visible_devices(slots, settings.gpus) is not None
    # The experiment's environment.environment_variables; pedl's own names (below) cannot be among them.
    if config is not None:
        env.update(config.environment.variables(gpu=on_gpu))
    env.update(
        PEDL_HARNESS_SOCKET=str(socket_path),
        PEDL_TRIAL_ID=str(start.trial_id),
        PEDL_RUN_ID=str(start.run_id),
        PYTHONUNBUFFERED="1",
    )
    env[BUDGET_ENV] = f"{settings.store_retry_budget_seconds:g}"
    if settings.process_limit.plan.rlimit:  # only where no pids cgroup bounds the run (pids_cgroup.py)
        env[PIDS_LIMIT_ENV] = str(settings.process_limit.plan.rlimit)
    harness_credentials(env, start.checkpoint_token)
    if r.distributed:
        slots = slots[index : index + 1]
        env.update(
            RANK=str(r.first_rank + index),
            LOCAL_RANK=str(index),
            WORLD_SIZE=str(r.world_size),
            LOCAL_WORLD_SIZE=str(r.local),
            MASTER_ADDR=r.master_addr,
            MASTER_PORT=str(r.master_port),
        )
        if settings.address:
            env["PEDL_AGENT_ADDRESS"] = settings.address
        # As torchrun: ranks sharing the machine's cores should not each take all of them.
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // r.local)))
    visible = cuda_visible_devices(slots, settings.gpus)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    elif slots and not r.distributed and settings.cpu_slots > len(slots):
        # Its share of the cores, as Ray gives a task its CPUs: a run taking all of them as
        # OpenMP threads spins them against the other slots' runs (measured: 8-15 ms of CPU per
        # batch of a tiny model instead of 0.3 ms on a busy 2-core machine).
        cores = os.cpu_count() or 1
        env.setdefault("OMP_NUM_THREADS", str(max(1, cores * len(slots) // settings.cpu_slots)))
    return env
