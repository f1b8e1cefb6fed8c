"""The scheduler's authorisation rule on its own: every RPC has a row, and the object rule."""

from __future__ import annotations

import grpc
import pytest

from pedl._server_auth import ANONYMOUS, CLUSTER, Denied, Principal
from pedl.v1 import agent_pb2, auth_pb2, scheduler_pb2
from pedl_scheduler import authz
from pedl_scheduler.authz import Access

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
