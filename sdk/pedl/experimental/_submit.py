"""Submitting to a cluster from Python: what `pedl experiment create` does, as a function."""

from __future__ import annotations

from pathlib import Path

import yaml

from pedl import _grpc
from pedl.config import ExperimentConfig
from pedl.context import pack
from pedl.experimental._session import resolve_master
from pedl.experimental.client import ExperimentClient, get_experiment
from pedl.model_def.static_check import check_model_definition
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc


def submit(config: ExperimentConfig, context_dir: Path, master: str | None = None) -> ExperimentClient:
    """Packs and checks the context (refusing before upload), then creates the experiment."""
    packed = pack(context_dir)
    check_model_definition(
        context_dir,
        config.entrypoint,
        [name for name, _ in packed.files],
    )
    address = resolve_master(master)
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(address))
    response = stub.CreateExperiment(
        scheduler_pb2.CreateExperimentRequest(
            config_yaml=yaml.safe_dump(config.raw, sort_keys=False),
            model_definition=packed.data,
            model_definition_name=packed.name,
        )
    )
    return get_experiment(response.experiment.id, address)
