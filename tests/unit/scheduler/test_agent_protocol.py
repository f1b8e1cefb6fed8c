"""Agents and the scheduler check each other's agent-link revision at registration: an agent from
before StartTrial.config_json (which sends no revision) is refused with a line saying what to do."""

from __future__ import annotations

import pytest

from pedl.v1 import agent_pb2
from pedl_agent import version
from pedl_scheduler import agent_protocol


def test_an_agent_of_the_previous_release_is_refused_naming_both_revisions() -> None:
    old = agent_pb2.RegisterAgent(agent_id="gpu-7", hostname="node7", version="0.9.0")
    reason = agent_protocol.refusal(old)
    assert reason == (
        "agent gpu-7 (pedl 0.9.0) speaks agent-link protocol 0, older than the 3 this scheduler needs "
        "(StartTrial.config_json, the versioned config document): upgrade pedl-agent on node7 to the "
        "scheduler's release"
    )


def test_an_agent_of_this_release_registers() -> None:
    register = agent_pb2.RegisterAgent(agent_id="a", protocol=version.AGENT_PROTOCOL)
    assert agent_protocol.refusal(register) is None


def test_this_releases_agent_and_scheduler_accept_each_other() -> None:
    assert version.AGENT_PROTOCOL >= agent_protocol.MIN_AGENT_PROTOCOL
    assert agent_protocol.SCHEDULER_PROTOCOL >= version.MIN_SCHEDULER_PROTOCOL
    version.check_scheduler_protocol(agent_protocol.SCHEDULER_PROTOCOL, "m:1")


def test_an_agent_refuses_a_scheduler_that_would_ignore_early_exits() -> None:
    """Protocol 2: a trial's early exit (set_stop_requested, report_early_exit) rides on its results;
    a scheduler of revision 1 would drive such a trial on, so this agent will not run trials for it."""
    with pytest.raises(version.IncompatibleScheduler, match="protocol 1, older than the 2"):
        version.check_scheduler_protocol(1, "m:1")


def test_an_agent_that_cannot_decode_the_config_document_is_refused() -> None:
    """Protocol 3: StartTrial.config_json is the versioned config document (pedl.config.carried); an
    agent of revision 2 would hand its harness a document it reads as a config with unknown fields."""
    assert agent_protocol.refusal(agent_pb2.RegisterAgent(agent_id="a", protocol=2)) is not None
    assert agent_protocol.refusal(agent_pb2.RegisterAgent(agent_id="a", protocol=3)) is None
