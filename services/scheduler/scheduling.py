"""Slot scheduling decisions: a pure function of the cluster state.

The scheduler calls `assign` once per tick with what is queued and what is free, then
acts on the result. Trials are gang-scheduled: all their slots at once, or none.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueuedTrial:
    trial_id: int
    experiment_id: int
    slots: int
    resource_pool: str = "default"


@dataclass(frozen=True)
class AgentCapacity:
    agent_id: str
    free_slots: tuple[str, ...]
    resource_pool: str = "default"


@dataclass(frozen=True)
class Assignment:
    trial_id: int
    agent_id: str
    slot_ids: tuple[str, ...]


def assign(queued: list[QueuedTrial], agents: list[AgentCapacity]) -> list[Assignment]:
    """First come, first served; each trial on the agent with the fewest free slots that fit it.

    Best fit keeps large blocks of slots free for multi-slot trials. A trial that fits
    nowhere is skipped, so a large trial does not block small ones behind it.
    """
    free = {a.agent_id: list(a.free_slots) for a in agents}
    pool = {a.agent_id: a.resource_pool for a in agents}
    out: list[Assignment] = []
    for trial in queued:
        fits = [
            agent_id
            for agent_id, slots in free.items()
            if pool[agent_id] == trial.resource_pool and len(slots) >= trial.slots
        ]
        if not fits:
            continue
        best = min(fits, key=lambda a: (len(free[a]), a))
        taken, free[best] = free[best][: trial.slots], free[best][trial.slots :]
        out.append(Assignment(trial.trial_id, best, tuple(taken)))
    return out
