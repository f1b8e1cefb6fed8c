"""The one authorisation rule on its own: every scheduler RPC has a row, the object rule, and what a
trial's token or a user may do in the checkpoint store."""

from __future__ import annotations

import grpc
import pytest

from pedl.v1 import agent_pb2, auth_pb2, scheduler_pb2
from pedl_server_auth import ANONYMOUS, CLUSTER, Denied, Principal, authz, trial_token
from pedl_server_auth.authz import Access

ALICE = Principal("alice", False)
BOB = Principal("bob", False)
ADMIN = Principal("root", True)
TRIAL = Principal("trial-3", False, kind="trial", experiment_id=1)


def test_every_scheduler_rpc_has_a_rule() -> None:
    served = [
        f"/{s.full_name}/{m.name}"
        for proto, name in (
            (auth_pb2, "AuthService"),
            (scheduler_pb2, "SchedulerService"),
            (agent_pb2, "AgentLinkService"),
        )
        for s in [proto.DESCRIPTOR.services_by_name[name]]
        for m in s.methods
    ]
    assert sorted(served) == sorted(authz.RULES)


def test_a_method_without_a_rule_is_refused() -> None:
    with pytest.raises(Denied, match="has no authorisation rule") as info:
        authz.check_call(ADMIN, "/pedl.v1.SchedulerService/SomethingNew")
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize(
    ("principal", "method", "allowed"),
    [
        (ALICE, "/pedl.v1.SchedulerService/KillExperiment", True),  # the object check follows
        (ALICE, "/pedl.v1.SchedulerService/SetAgentEnabled", False),
        (ADMIN, "/pedl.v1.SchedulerService/SetAgentEnabled", True),
        (ADMIN, "/pedl.v1.AuthService/Authorize", False),
        (CLUSTER, "/pedl.v1.AuthService/Authorize", True),
        (TRIAL, "/pedl.v1.SchedulerService/ListExperiments", False),
        (TRIAL, "/pedl.v1.AuthService/Login", True),
        (ANONYMOUS, "/pedl.v1.AgentLinkService/Connect", True),  # --no-auth
    ],
)
def test_who_may_call_what(principal: Principal, method: str, allowed: bool) -> None:
    if allowed:
        authz.check_call(principal, method)
    else:
        with pytest.raises(Denied):
            authz.check_call(principal, method)


def test_owner_or_admin_manage_and_reads_follow_the_private_flag() -> None:
    for private in (False, True):
        assert authz.may(ALICE, Access.MANAGE, "alice", private)
        assert not authz.may(BOB, Access.MANAGE, "alice", private)
        assert authz.may(ADMIN, Access.MANAGE, "alice", private)
        assert authz.may(CLUSTER, Access.MANAGE, "", private)
        assert not authz.may(TRIAL, Access.READ, "alice", private)
        assert authz.may(ALICE, Access.READ, "alice", private)
    assert authz.may(BOB, Access.READ, "alice", private=False)
    assert not authz.may(BOB, Access.READ, "alice", private=True)
    assert not authz.may(BOB, Access.MANAGE, "", private=False)  # made with the cluster secret: admins
    assert "only its owner or an admin" in authz.refusal(BOB, Access.MANAGE, 4, "alice")


CLAIM = trial_token.Claim(experiment_id=1, trial_id=3, run_id=2, expires_at=0, grants=frozenset({"parent"}))


@pytest.mark.parametrize(
    ("action", "experiment_id", "trial_id", "uuid", "refusal"),
    [
        (authz.WRITE, 1, 3, "new", None),
        (authz.READ, 1, 3, "own", None),
        (authz.READ, 1, 4, "parent", None),  # granted at dispatch: a PBT parent's
        (authz.READ, 1, 4, "other", "may read only that trial's checkpoints and the ones it was started"),
        (authz.WRITE, 1, 4, "parent", "may store only that trial's checkpoints"),
        (authz.WRITE, 2, 3, "new", "may store only that trial's checkpoints"),
        (authz.DELETE, 1, 3, "own", "may not delete checkpoints"),
    ],
)
def test_a_trial_token_reaches_its_own_trial_and_its_grants_only(
    action: str, experiment_id: int, trial_id: int, uuid: str, refusal: str | None
) -> None:
    if refusal is None:
        authz.check_trial_scope(CLAIM, action, experiment_id, trial_id, uuid)
        return
    with pytest.raises(Denied, match=refusal) as info:
        authz.check_trial_scope(CLAIM, action, experiment_id, trial_id, uuid)
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_users_delete_checkpoints_through_the_scheduler_only() -> None:
    authz.check_user_in_store(authz.READ)
    authz.check_user_in_store(authz.WRITE)
    with pytest.raises(Denied, match="pedl checkpoint delete"):
        authz.check_user_in_store(authz.DELETE)
    assert authz.STORE_ACCESS[authz.READ] is Access.READ
    assert authz.STORE_ACCESS[authz.WRITE] is authz.STORE_ACCESS[authz.DELETE] is Access.MANAGE


def test_a_trial_token_reports_metrics_only_for_its_own_live_run() -> None:
    own = Principal("trial-3", False, kind="trial", experiment_id=1, trial_id=3, run_id=2)
    authz.check_call(own, "/pedl.v1.SchedulerService/ReportTrialMetrics")  # the object check follows
    with pytest.raises(Denied, match="may not call"):
        authz.check_call(own, "/pedl.v1.SchedulerService/GetTrial")
    assert authz.own_trial_refusal(own, trial_id=3, run_id=2, live=True) is None
    assert "may report only that trial's metrics" in str(authz.own_trial_refusal(own, 4, 2, True))
    assert "has ended" in str(authz.own_trial_refusal(own, 3, 3, True))  # the trial restarted since
    assert "has ended" in str(authz.own_trial_refusal(own, 3, 2, False))
