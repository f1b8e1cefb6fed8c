"""`det.get_cluster_info()`: what the platform tells a trial's processes about their task.

The harness writes it as JSON to the file named by `PEDL_CLUSTER_INFO` before it starts a command
entrypoint; off a cluster there is none and the function returns None, as Determined's does.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

INFO_ENV = "PEDL_CLUSTER_INFO"


@dataclass(frozen=True)
class TrialInfo:
    trial_id: int
    experiment_id: int
    trial_seed: int
    hparams: dict[str, Any]
    config: dict[str, Any]
    steps_completed: int
    trial_run_id: int
    debug: bool = False
    inter_node_network_interface: str | None = None

    @property
    def _config(self) -> dict[str, Any]:
        """The experiment config under Determined's private name, which its 0.38 DeepSpeed DCGAN
        example reads (`info.trial._config["data"]`)."""
        return self.config


@dataclass(frozen=True)
class ClusterInfo:
    master_url: str
    cluster_id: str
    agent_id: str
    slot_ids: list[int]
    task_id: str
    allocation_id: str
    session_token: str
    task_type: str
    latest_checkpoint: str | None
    trial: TrialInfo
    container_addrs: list[str] = field(default_factory=list)
    container_rank: int = 0
    master_cert_file: str | None = None
    gpu_uuids: list[str] = field(default_factory=list)
    user_data: dict[str, Any] = field(default_factory=dict)

    @property
    def num_slots(self) -> int:
        return len(self.slot_ids)

    @property
    def _trial(self) -> TrialInfo:
        return self.trial


def parse_cluster_info(data: dict[str, Any]) -> ClusterInfo:
    trial = dict(data["trial"])
    return ClusterInfo(**{**data, "trial": TrialInfo(**trial)})


def get_cluster_info() -> ClusterInfo | None:
    """The running trial's info; None when this process does not run as a pedl trial."""
    path = os.environ.get(INFO_ENV)
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        return parse_cluster_info(json.load(f))
