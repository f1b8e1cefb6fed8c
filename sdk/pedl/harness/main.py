"""`python -m pedl.harness`: runs one trial for the agent, then exits (0 on TERMINATE, 1 on error)."""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import yaml

from pedl import _log
from pedl._metrics import from_struct
from pedl.harness.agent_link import AgentWorkloadSource, StoreCheckpoints
from pedl.harness.build import start_trial
from pedl.harness.hparams import typed_hparams
from pedl.harness.workloads import run_workloads

SOCKET_ENV = "PEDL_HARNESS_SOCKET"


def parse_config(config_yaml: str) -> dict[str, Any]:
    try:
        config = yaml.safe_load(config_yaml) if config_yaml else {}
    except yaml.YAMLError as exc:
        raise ValueError(f"the experiment config is not valid YAML: {exc}") from exc
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ValueError(f"the experiment config must be a mapping, got {type(config).__name__}")
    return config


def run(socket_path: str) -> None:
    source = AgentWorkloadSource(socket_path)
    try:
        info = source.trial_info()
        trial = info.trial
        config = parse_config(trial.config_yaml)
        hparams = typed_hparams(from_struct(trial.hparams), config)
        storage = config.get("checkpoint_storage")
        checkpoints = StoreCheckpoints(
            trial.checkpoint_store_address,
            trial.experiment_id,
            trial.trial_id,
            storage if isinstance(storage, dict) else None,
        )
        model_dir = Path(info.model_definition_dir or os.getcwd())
        with tempfile.TemporaryDirectory(prefix="pedl-restore-") as tmp:
            restore_dir = None
            if trial.latest_checkpoint_uuid:
                restore_dir = Path(tmp)
                checkpoints.fetch(trial.latest_checkpoint_uuid, restore_dir)
            controller = start_trial(model_dir, config, hparams, trial.trial_seed, restore_dir)
        try:
            run_workloads(controller, source, checkpoints)
        finally:
            getattr(checkpoints, "close", lambda: None)()
    finally:
        source.close()


def main() -> int:
    socket_path = os.environ.get(SOCKET_ENV)
    if not socket_path:
        print(f"pedl.harness: environment variable {SOCKET_ENV} is not set", file=sys.stderr)
        return 2
    _log.configure_logging("harness")
    try:
        run(socket_path)
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0
