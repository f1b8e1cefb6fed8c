"""The version the agent reports when it registers."""

from __future__ import annotations

from importlib import metadata


def _version() -> str:
    # From the installed distribution: `pedl.__version__` is missing when pedl imports as a namespace.
    try:
        return metadata.version("pedl")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"


AGENT_VERSION = _version()

# The revision of the agent link's messages this agent speaks (RegisterAgent.protocol). Bumped with
# every wire change the other side cannot bridge; services/scheduler/agent_protocol.py keeps the
# scheduler's side. 1: StartTrial.config_json (the parsed, normalised config) replaced config_yaml.
# 2: a result may say the trial ended itself early (WorkloadResult.early_exit).
# 3: StartTrial.config_json is the versioned config document (pedl.config.carried), decoded, not parsed.
AGENT_PROTOCOL = 3
# The oldest scheduler revision this agent can run trials for (AgentRegistered.protocol): one before
# 2 would read a trial's early exit (set_stop_requested, report_early_exit) as nothing and drive it on.
MIN_SCHEDULER_PROTOCOL = 2


class IncompatibleScheduler(Exception):
    """The scheduler speaks a revision of the link this agent cannot work with: retrying cannot help."""


def check_scheduler_protocol(protocol: int, master: str) -> None:
    if protocol < MIN_SCHEDULER_PROTOCOL:
        raise IncompatibleScheduler(
            f"the scheduler at {master} speaks agent-link protocol {protocol}, older than the "
            f"{MIN_SCHEDULER_PROTOCOL} this agent (pedl {AGENT_VERSION}) needs: upgrade the scheduler "
            "or run a pedl-agent of the scheduler's release"
        )
