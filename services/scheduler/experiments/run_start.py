"""What every StartTrial of a run carries beside the trial's own state: its checkpoint credential,
the experiment's model definition name and digest, and the Unix user its owner is linked to."""

from __future__ import annotations

import hashlib

from pedl.v1 import auth_pb2
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import users as user_ops
from pedl_server_auth import trial_token


def checkpoint_token(state: SchedulerState, exp: ExperimentRuntime, trial: TrialRuntime) -> str:
    """Good for this run's own checkpoints and the ones it starts from, until it ends or expires."""
    secret = state.cluster_secret
    if not secret:
        return ""
    grants = (trial.latest_checkpoint_uuid, "" if trial.latest_checkpoint_uuid else exp.warm_start_uuid)
    return trial_token.mint(secret, exp.id, trial.id, trial.run_id, grants, state.trial_token_ttl_seconds)


def model_definition(state: SchedulerState, exp: ExperimentRuntime) -> tuple[str, str]:
    """The experiment's model definition name and sha256 (the agents' cache key), read once."""
    if exp.model_definition_name is None or exp.model_definition_sha256 is None:
        row = experiment_ops.model_definition(state.db, exp.id)
        exp.model_definition_name = (row or {}).get("model_definition_name") or ""
        exp.model_definition_sha256 = (
            hashlib.sha256(row["model_definition"]).hexdigest() if row is not None else ""
        )
    return exp.model_definition_name, exp.model_definition_sha256


def agent_user(state: SchedulerState, exp: ExperimentRuntime) -> auth_pb2.AgentUser | None:
    """The Unix user the experiment's owner is linked to (`pedl user link-with-agent-user`), read at
    each start so a new link applies to the next run; None: the agent's --trial-user."""
    owner = experiment_ops.experiment_owner(state.db, exp.id)
    row = user_ops.agent_user_link(state.db, owner) if owner else None
    if row is None:
        return None
    return auth_pb2.AgentUser(
        uid=row["uid"], gid=row["gid"], user=row["agent_user"], group=row["agent_group"]
    )
