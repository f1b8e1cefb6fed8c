"""`from determined.experimental import client`: Determined's Python client for finding a finished
experiment's checkpoints, as its docs use it before `load_trial_from_checkpoint_path`:

    client.login(master="host:8080")          # optional; else $PEDL_MASTER ($DET_MASTER)
    path = client.get_experiment(7).top_checkpoint().download()

backed by `pedl.experimental.client` (experiments, trials, checkpoints, downloads).
"""

from __future__ import annotations

import os

from pedl.experimental.client import Checkpoint, ClientError, ExperimentClient, Trial
from pedl.experimental.client import get_experiment as _get_experiment

_master: str | None = None


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
        from pedl.experimental.client import resolve_master

        pedl_login(resolve_master(_default_master()), user, password)


def _default_master() -> str | None:
    return _master or os.environ.get("PEDL_MASTER") or os.environ.get("DET_MASTER")


def get_experiment(experiment_id: int) -> ExperimentClient:
    """The experiment's handle: `.top_checkpoint()`, `.trials()`, `.wait()`, `.state`."""
    return _get_experiment(experiment_id, master=_default_master())


class Determined:
    """Determined 0.13-0.17's client object: `Determined(master).get_experiment(id)`."""

    def __init__(
        self, master: str | None = None, user: str | None = None, password: str | None = None
    ) -> None:
        login(master, user, password)

    def get_experiment(self, experiment_id: int) -> ExperimentClient:
        return get_experiment(experiment_id)


__all__ = [
    "Checkpoint",
    "ClientError",
    "Determined",
    "ExperimentClient",
    "Trial",
    "get_experiment",
    "login",
]
