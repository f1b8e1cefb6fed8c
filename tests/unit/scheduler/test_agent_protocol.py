"""Agents and the scheduler check each other's agent-link revision at registration: an agent from
before StartTrial.config_json (which sends no revision) is refused with a line saying what to do."""

from __future__ import annotations

from pedl.v1 import agent_pb2
from pedl_agent import version
from pedl_scheduler import agent_protocol


def test_an_agent_of_the_previous_release_is_refused_naming_both_revisions() -> None:
    old = agent_pb2.RegisterAgent(agent_id="gpu-7", hostname="node7", version="0.9.0")
    reason = agent_protocol.refusal(old)
    assert reason == (
        "agent gpu-7 (pedl 0.9.0) speaks agent-link protocol 0, older than the 1 this scheduler needs "
        "(StartTrial.config_json): upgrade pedl-agent on node7 to the scheduler's release"
    )


def test_an_agent_of_this_release_registers() -> None:
    register = agent_pb2.RegisterAgent(agent_id="a", protocol=version.AGENT_PROTOCOL)
    assert agent_protocol.refusal(register) is None


def test_this_releases_agent_and_scheduler_accept_each_other() -> None:
    assert version.AGENT_PROTOCOL >= agent_protocol.MIN_AGENT_PROTOCOL
    assert agent_protocol.SCHEDULER_PROTOCOL >= version.MIN_SCHEDULER_PROTOCOL
    version.check_scheduler_protocol(agent_protocol.SCHEDULER_PROTOCOL, "m:1")
