"""`from determined.experimental import client`: Determined's Python client, backed by
`pedl.experimental.client`:

    client.login(master="host:8080")          # optional; else $PEDL_MASTER ($DET_MASTER)
    exp = client.create_experiment("const.yaml", "model_dir")
    assert exp.wait() == client.ExperimentState.COMPLETED
    for trial in exp.list_trials():
        for m in trial.iter_metrics("validation"):
            print(m.steps_completed, m.metrics)
    path = exp.top_checkpoint().download()

Determined's names map onto pedl's objects: `Experiment` is pedl's ExperimentClient, `Trial`,
`Checkpoint`, `TrialMetrics` and the state and sort enums are pedl's own.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Any

from pedl.experimental import client as _client
from pedl.experimental.checkpoint import CheckpointTrainingMetadata
from pedl.experimental.client import Checkpoint, ClientError, ExperimentClient, Trial, TrialMetrics
from pedl.experimental.states import (
    CheckpointSortBy,
    CheckpointState,
    ExperimentState,
    OrderBy,
    TrialSortBy,
    TrialState,
)

Experiment = ExperimentClient
ExperimentReference = ExperimentClient  # Determined 0.13-0.17's name
TrialReference = Trial
TrainingMetrics = ValidationMetrics = TrialMetrics

_master: str | None = None


class DownloadMode(Enum):
    """Accepted for Determined's `Checkpoint.download(mode=...)`; pedl chooses the path itself."""

    AUTO = "AUTO"
    DIRECT = "DIRECT"
    MASTER = "MASTER"


def login(
    master: str | None = None,
    user: str | None = None,
    password: str | None = None,
    cert_path: str | None = None,
    noverify: bool = False,
) -> None:
    """Names the master later calls use; with `user` and `password`, also logs in (as `pedl user
    login` does, the session saved for this master)."""
    global _master
    if cert_path is not None or noverify:
        raise ValueError(
            "client.login(cert_path=/noverify=): pedl reads its CA from PEDL_TLS_CA (or --tls-ca); "
            "leave these out"
        )
    _master = master
    if user is not None:
        if password is None:
            raise ValueError("client.login(user=...) needs password= too")
        from pedl.auth.login import login as pedl_login

        pedl_login(_client.resolve_master(_default_master()), user, password)


def logout() -> None:
    """Ends the saved session for the master (as `det user logout`)."""
    from pedl import _grpc, auth
    from pedl.v1 import auth_pb2, auth_pb2_grpc

    master = _client.resolve_master(_default_master())
    channel = _grpc.channel(master)
    try:
        if auth.load_logins().get(master) is not None:
            auth_pb2_grpc.AuthServiceStub(channel).Logout(auth_pb2.LogoutRequest(), timeout=30.0)
    finally:
        auth.forget_login(master)
        channel.close()


def _default_master() -> str | None:
    return _master or os.environ.get("PEDL_MASTER") or os.environ.get("DET_MASTER")


def get_experiment(experiment_id: int) -> ExperimentClient:
    """The experiment's handle: `.wait()`, `.list_trials()`, `.top_checkpoint()`, `.state`, ..."""
    return _client.get_experiment(experiment_id, master=_default_master())


def get_trial(trial_id: int) -> Trial:
    return _client.get_trial(trial_id, master=_default_master())


def get_checkpoint(uuid: str) -> Checkpoint:
    return _client.get_checkpoint(uuid, master=_default_master())


def list_experiments(
    name: str | None = None, states: list[Any] | None = None, users: list[str] | None = None
) -> list[ExperimentClient]:
    return _client.list_experiments(name=name, states=states, users=users, master=_default_master())


def create_experiment(
    config: str | os.PathLike[str] | dict[str, Any],
    model_dir: str | os.PathLike[str],
    includes: list[Any] | None = None,
    parent_id: int | None = None,
    project_id: int | None = None,
    template: str | None = None,
) -> ExperimentClient:
    """Submits `model_dir` with `config` (a YAML file's path or a dict) and returns the experiment."""
    for given, what in (
        (includes, "includes= (pedl ships only the model directory)"),
        (parent_id, "parent_id= (pedl does not fork experiments)"),
        (template, "template= (pedl has no config templates)"),
    ):
        if given:
            raise TypeError(f"client.create_experiment(): pedl does not support {what}")
    if project_id not in (None, 1):
        raise TypeError("client.create_experiment(): pedl has only the default project (project_id=1)")
    from pedl.config import parse_experiment_config
    from pedl.experimental._submit import submit

    source: Any = config if isinstance(config, dict) else Path(config)
    return submit(parse_experiment_config(source), Path(model_dir), _default_master())


class Determined:
    """Determined 0.13-0.17's client object: `Determined(master).get_experiment(id)`."""

    def __init__(
        self, master: str | None = None, user: str | None = None, password: str | None = None
    ) -> None:
        login(master, user, password)

    def get_experiment(self, experiment_id: int) -> ExperimentClient:
        return get_experiment(experiment_id)

    def get_trial(self, trial_id: int) -> Trial:
        return get_trial(trial_id)

    def get_checkpoint(self, uuid: str) -> Checkpoint:
        return get_checkpoint(uuid)

    def create_experiment(self, config: Any, model_dir: Any, **kwargs: Any) -> ExperimentClient:
        return create_experiment(config, model_dir, **kwargs)


__all__ = [
    "Checkpoint",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointTrainingMetadata",
    "ClientError",
    "Determined",
    "DownloadMode",
    "Experiment",
    "ExperimentClient",
    "ExperimentReference",
    "ExperimentState",
    "OrderBy",
    "TrainingMetrics",
    "Trial",
    "TrialMetrics",
    "TrialReference",
    "TrialSortBy",
    "TrialState",
    "ValidationMetrics",
    "create_experiment",
    "get_checkpoint",
    "get_experiment",
    "get_trial",
    "list_experiments",
    "login",
    "logout",
]
