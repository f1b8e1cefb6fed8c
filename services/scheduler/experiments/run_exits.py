"""What a run's exit leaves behind, decided without the database: its timeline rows, and whether a
gang over several agents that finished its work still waits for other members to exit.

A gang's trial completes only once every agent has reported its exit: each agent sends its ranks'
last output before that report, so until then a user reading the logs of a COMPLETED trial could
miss rank 1's final lines, and the slots of a member still exiting would go to the next trial.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pedl.v1 import common_pb2
from pedl_scheduler.runtime import TrialRuntime

# Phases kept per run (an agent could send any number).
MAX_PHASES = 2000
# How long a gang that finished its work waits for its other members' exits after the first one.
GANG_EXIT_GRACE_SECONDS = 60.0


def timeline_phase(name: str, start: float, end: float, source: str, run_id: int) -> dict[str, Any]:
    return {"name": name[:100], "start": start, "end": end, "source": source, "run_id": run_id}


def timeline_rows(
    trial: TrialRuntime, phases: Sequence[common_pb2.TimelinePhase], now: float
) -> list[dict[str, Any]]:
    """The run's phases: its slots assigned, what the agent and harness timed, its slots free."""
    assigned = trial.assigned_at
    rows = [timeline_phase("slot assigned", assigned, assigned, "scheduler", trial.run_id)]
    rows.extend(timeline_phase(p.name, p.start, p.end, p.source, trial.run_id) for p in phases[:MAX_PHASES])
    rows.append(timeline_phase("slot free", now, now, "scheduler", trial.run_id))
    return rows


def gang_still_exiting(trial: TrialRuntime, agent_id: str, exit_code: int, killed: bool, now: float) -> bool:
    """Whether the gang waits for other members after `agent_id` reported a clean exit at the end of
    the trial's work (`now` is monotonic: the grace for the rest starts at the first exit)."""
    if not trial.peers or exit_code != 0 or killed or not trial.sequencer.terminated:
        return False
    if trial.exits_awaited is None:
        trial.exits_awaited = set(trial.gang_agents())
        trial.exits_deadline = now + GANG_EXIT_GRACE_SECONDS
    trial.exits_awaited.discard(agent_id)
    return bool(trial.exits_awaited)


def agent_lost_phase(trial: TrialRuntime, now: float) -> common_pb2.TimelinePhase:
    """A run whose agent was lost keeps what the scheduler saw (the agent's and harness's phases went
    with the agent): its slots assigned, this point, its slots free."""
    return common_pb2.TimelinePhase(
        name=f"agent {trial.agent_id} lost", start=now, end=now, source="scheduler", run_id=trial.run_id
    )


def restart_origin(trial: TrialRuntime) -> str:
    """Where a restarted run starts from, as its log line says."""
    if trial.latest_checkpoint_uuid:
        return f"checkpoint {trial.latest_checkpoint_uuid} (batch {trial.latest_checkpoint_batches})"
    return "the beginning"


def infrastructure_cause_text(cause: str, reason: str) -> str:
    """The cause, with the error's last line where it adds to it."""
    detail = reason.strip().splitlines()[-1] if reason.strip() else cause
    return cause if detail == cause else f"{cause} ({detail})"
