"""A Core API script under the harness without an agent: its CoreApiTrial, the socket server the
script calls, and the cluster info and environment a trial's script gets."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pedl.harness.core_api_server import CoreApiServer
from pedl.harness.core_api_trial import CoreApiTrial, ScriptSettings, handlers
from pedl.harness.script_env import script_environment
from pedl.harness.script_run import cluster_info
from pedl.v1 import agent_pb2


def start_script(tmp_path: Path, settings: ScriptSettings) -> tuple[CoreApiTrial, CoreApiServer]:
    """Starts `settings.command` as trial 1's script; the caller kills the trial and closes the server."""
    trial = CoreApiTrial(settings, checkpoints=None, work_dir=tmp_path)  # type: ignore[arg-type]
    server = CoreApiServer(tmp_path / "core.sock", handlers(trial))
    info = tmp_path / "info.json"
    info.write_text(json.dumps(cluster_info(agent_pb2.StartTrial(trial_id=1, run_id=1), {}, {}, None)))
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    trial.start(script_environment(env, str(server.socket_path), server.key, info))
    return trial, server
