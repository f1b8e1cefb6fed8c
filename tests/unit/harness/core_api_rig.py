"""A Core API script under the harness without an agent: its CoreApiTrial, the socket server the
script calls, and the cluster info and environment a trial's script gets."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pedl.harness.core_api_server import CoreApiServer
from pedl.harness.core_api_trial import CoreApiTrial, ScriptSettings, handlers
from pedl.harness.script_env import script_environment
from pedl.harness.script_run import cluster_info
from pedl.v1 import agent_pb2, common_pb2


class StoredCheckpoints:
    """The checkpoints a script committed, by the batches (progress) each was stored at."""

    def __init__(self) -> None:
        self.progress: list[int] = []

    def store(self, directory: Path, progress: int, uuid: str, extra_metadata: dict[str, str]) -> Any:
        self.progress.append(progress)
        return common_pb2.Checkpoint(uuid=uuid)


def start_script(
    tmp_path: Path, settings: ScriptSettings, checkpoints: StoredCheckpoints | None = None
) -> tuple[CoreApiTrial, CoreApiServer]:
    """Starts `settings.command` as trial 1's script; the caller kills the trial and closes the server."""
    stored = checkpoints or StoredCheckpoints()
    trial = CoreApiTrial(settings, checkpoints=stored, work_dir=tmp_path)  # type: ignore[arg-type]
    server = CoreApiServer(tmp_path / "core.sock", handlers(trial))
    info = tmp_path / "info.json"
    # A trial's config names its searcher metric (Trainer.fit's checkpoint_policy='best' reads it).
    config = {"searcher": {"metric": settings.searcher_metric}} if settings.searcher_metric else {}
    start = agent_pb2.StartTrial(trial_id=1, run_id=1)
    info.write_text(json.dumps(cluster_info(start, config, {}, None)))
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    trial.start(script_environment(env, str(server.socket_path), server.key, info))
    return trial, server
