"""Which agents this scheduler can drive: the link revision each side speaks (RegisterAgent.protocol).

An agent that does not know a field the scheduler relies on would run trials wrongly (e.g. a harness
started without its config), so it is refused at registration with one line naming both revisions
and what to do, rather than accepted and left to fail trial by trial. Agents before revision 1 do
not send the field at all and read as 0.
"""

from __future__ import annotations

from pedl.v1 import agent_pb2

# What this scheduler speaks (AgentRegistered.protocol); the agent's side: services/agent/version.py.
SCHEDULER_PROTOCOL = 3
# 1: StartTrial carries the effective config as config_json (field 19); config_yaml (4) is gone.
# 2: results may carry WorkloadResult.early_exit. Agents of revision 1 never send it (their harness
# refuses set_stop_requested(True)), so they stay welcome.
# 3: StartTrial.config_json is the versioned config document (pedl.config.carried); an agent before it
# would hand its harness a document it reads as a config with unknown fields.
MIN_AGENT_PROTOCOL = 3


def refusal(register: agent_pb2.RegisterAgent) -> str | None:
    """Why the agent cannot register here, or None when it can."""
    if register.protocol >= MIN_AGENT_PROTOCOL:
        return None
    version = register.version or "unknown"
    return (
        f"agent {register.agent_id or '?'} (pedl {version}) speaks agent-link protocol "
        f"{register.protocol}, older than the {MIN_AGENT_PROTOCOL} this scheduler needs "
        "(StartTrial.config_json, the versioned config document): upgrade pedl-agent on "
        f"{register.hostname or 'its machine'} to the scheduler's release"
    )
