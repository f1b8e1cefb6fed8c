"""The harness for a command entrypoint: start the script, serve its Core API, run the workloads.

Every rank's harness runs the command once (the agent has already started one harness per slot,
with torchrun's environment) and serves its own script; the chief's alone takes workloads from
the agent. A rank's harness exits with its script's exit code.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from pedl import _log
from pedl.config import ExperimentConfig
from pedl.harness import rank_network
from pedl.harness.agent_client import AgentWorkloadSource, StoreCheckpoints
from pedl.harness.core_api_server import CoreApiServer
from pedl.harness.core_api_trial import CoreApiTrial, ScriptFailed, ScriptSettings, handlers
from pedl.harness.distributed import Launch
from pedl.harness.script_env import script_environment
from pedl.harness.tensorboard_sync import TensorboardUploader
from pedl.v1 import agent_pb2, common_pb2

KIND = common_pb2.WorkloadKind


def is_command(config: ExperimentConfig) -> bool:
    spec = config.entrypoint_spec
    return spec is not None and spec.kind == "command"


def cluster_info(
    trial: agent_pb2.StartTrial, config: dict[str, Any], hparams: dict[str, Any], launch: Launch | None
) -> dict[str, Any]:
    """What `det.get_cluster_info()` returns to the script (Determined's ClusterInfo fields)."""
    slots = [int(s) if s.isdigit() else s for s in trial.slot_ids]
    local = launch.local_world_size if launch else 1
    rank = launch.rank if launch else 0
    nodes = max((launch.world_size if launch else 1) // max(local, 1), 1)
    return {
        "master_url": os.environ.get("PEDL_MASTER", ""),
        "cluster_id": "pedl",
        "agent_id": os.environ.get("PEDL_AGENT_ID") or socket.gethostname(),
        "slot_ids": slots,
        "task_id": f"{trial.experiment_id}.{trial.trial_id}",
        "allocation_id": f"{trial.experiment_id}.{trial.trial_id}.{trial.run_id}",
        "session_token": "",
        "task_type": "TRIAL",
        # A warm start hands the script the source checkpoint, at steps_completed 0 (as Determined).
        "latest_checkpoint": trial.latest_checkpoint_uuid or trial.warm_start_checkpoint_uuid or None,
        "container_addrs": [launch.master_addr if launch else "127.0.0.1"] * nodes,
        "container_rank": rank // max(local, 1),
        "trial": {
            "trial_id": trial.trial_id,
            "experiment_id": trial.experiment_id,
            "trial_seed": trial.trial_seed,
            "hparams": hparams,
            "config": config,
            "steps_completed": trial.latest_checkpoint_batches,
            "trial_run_id": trial.run_id,
        },
    }


def run_script(
    source: AgentWorkloadSource,
    info: Any,
    parsed: ExperimentConfig,
    hparams: dict[str, Any],
    checkpoints: StoreCheckpoints,
    launch: Launch | None,
    tensorboard: TensorboardUploader | None = None,
) -> int:
    """Runs the command to its end; the exit code for the harness. `tensorboard`: the uploader of the
    run's event files (a script in TensorboardMode.MANUAL drives it itself, on any rank)."""
    from pedl.searcher.operations import operation_lengths

    trial = info.trial
    spec = parsed.entrypoint_spec
    assert spec is not None and spec.kind == "command"
    model_dir = Path(info.model_definition_dir or os.getcwd())
    work_dir = model_dir.parent
    chief = launch is None or launch.rank == 0
    searcher = parsed.searcher
    settings = ScriptSettings(
        command=list(spec.command),
        shell=spec.shell,
        model_dir=model_dir,
        chief=chief,
        searcher_metric=searcher.metric,
        time_metric=searcher.time_metric,
        operation_lengths=operation_lengths(parsed),
        start_progress=trial.latest_checkpoint_batches,
        configured_unit=f"UNIT_{parsed.script_length_unit.upper()}",
    )
    script = CoreApiTrial(settings, checkpoints, work_dir, trial.run_id)
    rank = launch.rank if launch else 0
    info_path = work_dir / f"cluster-info-{rank}.json"
    info_path.write_text(json.dumps(cluster_info(trial, parsed.raw, hparams, launch)))
    # Unix socket paths are limited to ~107 bytes; a trial's work directory can be longer.
    socket_dir = Path(tempfile.mkdtemp(prefix="pedl-core-"))
    calls = handlers(script)
    if tensorboard is not None:
        calls.update(tensorboard_manual=tensorboard.set_manual, tensorboard_upload=tensorboard.upload_named)
    server = CoreApiServer(socket_dir / "core.sock", calls)
    log = _log.get_logger(component="harness")
    try:
        env = script_environment(dict(os.environ), str(server.socket_path), server.key, info_path)
        if launch is not None and rank_network.spans_machines(launch.world_size, launch.local_world_size):
            rank_network.choose_interfaces(env)  # the script's own gloo/NCCL group spans machines too
        script.start(env)
        log.info("script started", command=script.shown, rank=rank)
        if not chief:
            code = script.wait_for_exit()
            if code and server.store_unavailable is not None:
                raise server.store_unavailable
            return code
        try:
            while True:
                workload = source.next_workload()
                if workload.kind == KIND.WORKLOAD_KIND_TERMINATE:
                    script.close()
                    return 0
                result = script.run_workload(workload)
                log.info(
                    "workload completed",
                    kind=KIND.Name(workload.kind),
                    total_batches=workload.total_batches,
                    progress=script.progress,
                    reports=len(result.script_reports),
                )
                source.complete(result)
        except ScriptFailed as e:
            if server.store_unavailable is not None:  # the script failed because the store did
                raise server.store_unavailable from e
            if (line := e.determined_line()) is not None:
                print(line, flush=True)  # into the trial's log, where Determined's users look for it
            raise
        finally:
            script.kill()
    finally:
        server.close()
        shutil.rmtree(socket_dir, ignore_errors=True)
