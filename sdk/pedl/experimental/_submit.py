"""Submitting to a cluster from Python: what `pedl experiment create` does, as a function."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from pedl import _grpc
from pedl.config import ExperimentConfig
from pedl.context import pack
from pedl.model_def.static_check import check_model_definition
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

DEFAULT_MASTER = "127.0.0.1:8080"
TERMINAL = {
    common_pb2.EXPERIMENT_STATE_COMPLETED: "COMPLETED",
    common_pb2.EXPERIMENT_STATE_ERROR: "ERROR",
    common_pb2.EXPERIMENT_STATE_CANCELED: "CANCELED",
}


def master_address(master: str | None = None) -> str:
    return master or os.environ.get("PEDL_MASTER") or DEFAULT_MASTER


@dataclass
class ExperimentReference:
    """An experiment on the cluster."""

    id: int
    master: str

    def _stub(self) -> scheduler_pb2_grpc.SchedulerServiceStub:
        return scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(self.master))

    def state(self) -> str:
        response = self._stub().GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=self.id))
        return common_pb2.ExperimentState.Name(response.experiment.state).removeprefix("EXPERIMENT_STATE_")

    def wait(self, timeout: float | None = None, poll: float = 1.0) -> str:
        """Blocks until the experiment ends; returns COMPLETED, ERROR or CANCELED."""
        deadline = None if timeout is None else time.monotonic() + timeout
        stub = self._stub()
        while True:
            state = stub.GetExperiment(
                scheduler_pb2.GetExperimentRequest(experiment_id=self.id)
            ).experiment.state
            if state in TERMINAL:
                return TERMINAL[state]
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"experiment {self.id} did not end within {timeout} s")
            time.sleep(poll)


def submit(config: ExperimentConfig, context_dir: Path, master: str | None = None) -> ExperimentReference:
    """Packs and checks the context (refusing before upload), then creates the experiment."""
    packed = pack(context_dir)
    check_model_definition(
        context_dir,
        config.entrypoint if isinstance(config.entrypoint, str) else None,
        [name for name, _ in packed.files],
    )
    address = master_address(master)
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(address))
    response = stub.CreateExperiment(
        scheduler_pb2.CreateExperimentRequest(
            config_yaml=yaml.safe_dump(config.raw, sort_keys=False),
            model_definition=packed.data,
            model_definition_name=packed.name,
        )
    )
    return ExperimentReference(response.experiment.id, address)
