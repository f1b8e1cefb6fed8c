"""May this identity do this to that object: the one authorisation rule of the scheduler and the store.

Identities (`pedl_server_auth.Principal.kind`): no credential; a user's session (its owner or
another user, admin or not); the cluster secret (agents, the checkpoint store, operators' scripts);
a trial's token (scoped to one trial run, for the checkpoint store only).

The scheduler's RPCs (`RULES`: `check_call` at the door, `may` once the servicer knows the owner):

| call                                                        | needs                                 |
|-------------------------------------------------------------|---------------------------------------|
| Login, health, reflection                                   | nothing                               |
| WhoAmI, Logout, ListUsers, ListAgents, GetClusterInfo,      | a user session or the cluster secret  |
| CreateExperiment, UploadExperiment                          |                                       |
| SetUserPassword, SetUserDisplayName                         | that user's session, or an admin      |
| CreateUser, SetUserActive, LinkAgentUser, RenameUser,       | an admin                              |
| SetUserAdmin, SetAgentEnabled, GetMasterConfig              |                                       |
| ListExperiments, GetExperiment, WaitExperiment, GetTrial,   | READ the experiment (below)           |
| ListTrialDetails, GetTrialLogs, GetMetrics,                 |                                       |
| GetModelDefinition                                          |                                       |
| Kill/Pause/Activate/Patch/DeleteExperiment, KillTrial,      | MANAGE the experiment: owner or admin |
| DeleteCheckpoints, SetCheckpointMetadata,                   |                                       |
| RemoveCheckpointFiles                                       |                                       |
| ReportTrialMetrics                                          | MANAGE, or the trial's own live run's |
|                                                             | token (`own_trial_refusal`)           |
| AgentLinkService.Connect, ValidateToken, Authorize          | the cluster secret                    |

READ: every signed-in user reads every experiment (Determined's open-source default); with
`--private-experiments` a user who is not an admin sees only the experiments they own (lists
are filtered, and so are the checkpoints the store lists and serves). MANAGE (every mutation:
kill, pause, activate, description/labels/archive, delete, checkpoint delete in the store, and a
model definition: it is only ever written at create) needs the experiment's owner or an admin.
The cluster secret acts as an admin. A trial token calls only the RPCs whose rule says `own_trial`
(a script reporting its own metrics), and only for its own trial while its run is live; the scheduler
refuses it for every other RPC, and the store asks `Authorize` whether the trial's run is still live.

A method without a row is refused at run time (default deny), and the RPC table test
(tests/integration/test_rpc_authorization.py) fails for it, so a new RPC needs its rule here.

The checkpoint store's calls (services/checkpoint_store/authz.py enforces them; its actions are
`READ`, `WRITE`, `DELETE`):

| call                                    | cluster | trial token (its run live)     | user session   |
|-----------------------------------------|---------|--------------------------------|----------------|
| UploadCheckpoint, Begin/Finish/AbortUpload | yes  | its own trial's only           | MANAGE         |
| DownloadCheckpoint, GetCheckpoint       | yes     | its own trial's, and those it  | READ           |
|                                         |         | was granted at dispatch (its   |                |
|                                         |         | latest, a PBT parent's, a warm |                |
|                                         |         | start's)                       |                |
| ListCheckpoints                         | yes     | its own trial (trial_id = its) | READ, filtered |
| DeleteCheckpoint, RemoveCheckpointFiles | yes     | never                          | never (*)      |
| UploadTensorboardFiles                  | yes     | its own trial's only           | MANAGE         |
| List/DownloadTensorboardFile(s)         | yes     | its own trial's only           | READ           |
| DeleteTensorboardFiles                  | yes     | never                          | never (*)      |

A user's column is answered by the scheduler (`AuthService.Authorize`, store_questions.py, with
`may` and `STORE_ACCESS`), never by the store, so deactivation and `logout --all` act at once. A
trial's column is `check_trial_scope`, which the store runs itself on the token's signed scope;
the scheduler only says whether the token's run is still live.
(*) Users delete through the scheduler (`DeleteCheckpoints`), which owns a checkpoint's lifecycle:
it checks ownership and that nothing still needs the checkpoint, then deletes in the store with the
cluster secret. A delete in the store behind its back left it listing, and resuming trials from,
checkpoints whose bytes were gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import grpc

from pedl_server_auth.principal import Denied, Principal
from pedl_server_auth.trial_token import Claim


class Who(Enum):
    OPEN = "anyone"
    SIGNED_IN = "a user session or the cluster secret"
    SELF_OR_ADMIN = "that user or an admin"
    ADMIN = "an admin"
    CLUSTER = "the cluster secret (pedl services)"


class Access(Enum):
    """What a call does to the experiment it names; checked by the servicer once it knows the owner."""

    NONE = "none"
    READ = "read"
    MANAGE = "manage"


@dataclass(frozen=True)
class Rule:
    who: Who
    access: Access = Access.NONE
    # A trial's token may call it too, for its own trial only (the servicer checks which).
    own_trial: bool = False


_S, _A, _L = "/pedl.v1.SchedulerService/", "/pedl.v1.AuthService/", "/pedl.v1.AgentLinkService/"
RULES: dict[str, Rule] = {
    _A + "Login": Rule(Who.OPEN),
    _A + "Logout": Rule(Who.SIGNED_IN),
    _A + "WhoAmI": Rule(Who.SIGNED_IN),
    _A + "ListUsers": Rule(Who.SIGNED_IN),
    _A + "SetUserPassword": Rule(Who.SELF_OR_ADMIN),
    _A + "SetUserDisplayName": Rule(Who.SELF_OR_ADMIN),
    _A + "CreateUser": Rule(Who.ADMIN),
    _A + "SetUserActive": Rule(Who.ADMIN),
    _A + "LinkAgentUser": Rule(Who.ADMIN),
    _A + "RenameUser": Rule(Who.ADMIN),
    _A + "SetUserAdmin": Rule(Who.ADMIN),
    _A + "ValidateToken": Rule(Who.CLUSTER),
    _A + "Authorize": Rule(Who.CLUSTER),
    _L + "Connect": Rule(Who.CLUSTER),
    _S + "CreateExperiment": Rule(Who.SIGNED_IN),
    _S + "UploadExperiment": Rule(Who.SIGNED_IN),
    _S + "ListAgents": Rule(Who.SIGNED_IN),
    _S + "GetClusterInfo": Rule(Who.SIGNED_IN),
    _S + "SetAgentEnabled": Rule(Who.ADMIN),
    _S + "GetMasterConfig": Rule(Who.ADMIN),
    _S + "ListExperiments": Rule(Who.SIGNED_IN, Access.READ),
    _S + "GetExperiment": Rule(Who.SIGNED_IN, Access.READ),
    _S + "WaitExperiment": Rule(Who.SIGNED_IN, Access.READ),
    _S + "GetTrial": Rule(Who.SIGNED_IN, Access.READ),
    _S + "ListTrialDetails": Rule(Who.SIGNED_IN, Access.READ),
    _S + "GetTrialLogs": Rule(Who.SIGNED_IN, Access.READ),
    _S + "GetMetrics": Rule(Who.SIGNED_IN, Access.READ),
    _S + "GetModelDefinition": Rule(Who.SIGNED_IN, Access.READ),
    _S + "KillExperiment": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "PauseExperiment": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "ActivateExperiment": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "PatchExperiment": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "DeleteExperiment": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "KillTrial": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "DeleteCheckpoints": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "RemoveCheckpointFiles": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "SetCheckpointMetadata": Rule(Who.SIGNED_IN, Access.MANAGE),
    _S + "ReportTrialMetrics": Rule(Who.SIGNED_IN, Access.MANAGE, own_trial=True),
}


def check_call(principal: Principal, method: str) -> None:
    """Raises Denied unless `principal` may call `method` at all (object checks come later)."""
    rule = RULES.get(method)
    if rule is None:
        raise Denied(grpc.StatusCode.PERMISSION_DENIED, f"{method} has no authorisation rule: refused")
    if principal.kind == "anonymous" or rule.who is Who.OPEN:
        return
    if principal.kind == "trial" and not rule.own_trial:
        raise Denied(
            grpc.StatusCode.PERMISSION_DENIED,
            f"a trial's token may not call {method}: it is good only for its own checkpoints",
        )
    if rule.who is Who.CLUSTER and principal.kind != "cluster":
        raise Denied(grpc.StatusCode.PERMISSION_DENIED, f"{method} is for pedl services only")
    if rule.who is Who.ADMIN and not principal.admin:
        raise Denied(grpc.StatusCode.PERMISSION_DENIED, f"{method.rsplit('/', 1)[-1]} needs an admin")


def may(principal: Principal, access: Access, owner: str | None, private: bool) -> bool:
    """The object rule. `owner` None: the experiment does not exist (only admins pass)."""
    if principal.admin or access is Access.NONE:
        return True
    is_owner = principal.kind == "user" and owner is not None and principal.username == owner
    if access is Access.MANAGE:
        return is_owner
    return is_owner or (not private and principal.kind == "user")


def own_trial_refusal(principal: Principal, trial_id: int, run_id: int, live: bool) -> str | None:
    """A trial token's object rule: None when it is the token of `trial_id`'s current run
    (`run_id`) and that run is live, else the one line the caller reads."""
    if principal.trial_id != trial_id:
        return f"the token of trial {principal.trial_id} may report only that trial's metrics"
    if principal.run_id != run_id or not live:
        return f"run {principal.run_id} of trial {trial_id} has ended: its token is revoked"
    return None


def refusal(principal: Principal, access: Access, exp_id: int, owner: str | None) -> str:
    """The one line a refused caller reads."""
    whose = f"user {owner!r}" if owner else "no user"
    if access is Access.MANAGE:
        return f"experiment {exp_id} belongs to {whose}: only its owner or an admin may change it"
    return f"experiment {exp_id} is private to its owner (the scheduler runs with --private-experiments)"


def may_change_password(principal: Principal, username: str) -> bool:
    """Also a display name: a user's own, or an admin anyone's."""
    return principal.admin or (principal.kind == "user" and principal.username == username)


# The checkpoint store's actions (`AuthorizeRequest.action`) and what each needs of the experiment.
READ, WRITE, DELETE = "read", "write", "delete"
STORE_ACCESS = {READ: Access.READ, WRITE: Access.MANAGE, DELETE: Access.MANAGE}


def check_user_in_store(action: str) -> None:
    """Raises Denied for what no user may do in the store itself, whoever owns the checkpoint."""
    if action == DELETE:
        raise Denied(
            grpc.StatusCode.PERMISSION_DENIED,
            "checkpoints are deleted through the scheduler (`pedl checkpoint delete UUID`), "
            "which checks ownership and that no trial needs them",
        )


def check_trial_scope(claim: Claim, action: str, experiment_id: int, trial_id: int, uuid: str) -> None:
    """Raises Denied unless a trial's (genuine) token covers `action` on that trial's checkpoint."""
    own = claim.experiment_id == experiment_id and claim.trial_id == trial_id
    if action == DELETE:
        raise Denied(grpc.StatusCode.PERMISSION_DENIED, "a trial's token may not delete checkpoints")
    if own or (action == READ and uuid and uuid in claim.grants):
        return
    whose = f"trial {claim.trial_id} of experiment {claim.experiment_id}"
    if action == WRITE:
        raise Denied(
            grpc.StatusCode.PERMISSION_DENIED, f"the token of {whose} may store only that trial's checkpoints"
        )
    raise Denied(
        grpc.StatusCode.PERMISSION_DENIED,
        f"the token of {whose} may read only that trial's checkpoints and the ones it was started from",
    )
