"""The single-agent `assign` call the scheduler used before `decide`; kept until its caller moves."""

from __future__ import annotations

from dataclasses import dataclass

from pedl_scheduler.scheduling.policy import decide
from pedl_scheduler.scheduling.state import DEFAULT_POOL, Agent, ClusterState, QueuedTrial, SchedulingPolicy


@dataclass(frozen=True)
class AgentCapacity:
    agent_id: str
    free_slots: tuple[str, ...]
    resource_pool: str = DEFAULT_POOL


@dataclass(frozen=True)
class Assignment:
    trial_id: int
    agent_id: str
    slot_ids: tuple[str, ...]


def assign(queued: list[QueuedTrial], agents: list[AgentCapacity]) -> list[Assignment]:
    """`decide` over free slots only, with default resources and no preemption.

    Each agent is taken to be as large as its free slots, and a trial placed over several
    agents is left out, since one Assignment names one agent.
    """
    state = ClusterState(
        agents=[Agent(a.agent_id, a.free_slots, a.free_slots, a.resource_pool) for a in agents],
        queued=list(queued),
    )
    decision = decide(state, SchedulingPolicy(priority_preemption=False))
    return [
        Assignment(trial_id, allocation[0].agent_id, allocation[0].slot_ids)
        for trial_id, allocation in decision.assignments.items()
        if len(allocation) == 1
    ]
