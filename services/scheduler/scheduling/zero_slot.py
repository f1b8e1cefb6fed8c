"""CPU-only trials (`slots_per_trial: 0`): they need no slot, so they start at once, spread out.

Each agent runs at most `cap` of them (by default as many as it has slots, at least one),
so a burst of CPU-only trials cannot swamp one host's CPUs and memory.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from pedl_scheduler.scheduling.state import Agent, Allocation, QueuedTrial, RunningTrial


def place_zero_slot_trials(
    queued: Sequence[QueuedTrial],
    agents: Sequence[Agent],
    running: Sequence[RunningTrial],
    priority_of: Callable[[int], int],
    cap: int | None,
) -> dict[int, tuple[Allocation, ...]]:
    """Highest priority and oldest first, each on the agent of its pool offering its environment
    that runs the fewest such trials."""
    count: dict[str, int] = {}
    for r in running:
        if r.allocations and not r.slots:
            for a in r.allocations:
                count[a.agent_id] = count.get(a.agent_id, 0) + 1
    limit = {a.agent_id: cap if cap is not None else max(len(a.slot_ids), 1) for a in agents}
    # One heap per (pool, environment), made when first needed; an agent offering several
    # environments sits in several heaps, so entries whose count is stale are refreshed on pop.
    heaps: dict[tuple[str, str], list[tuple[int, str]]] = {}

    def heap_for(pool: str, environment: str) -> list[tuple[int, str]]:
        key = (pool, environment)
        if key not in heaps:
            heaps[key] = [
                (count.get(a.agent_id, 0), a.agent_id)
                for a in agents
                if a.resource_pool == pool and environment in a.environments
            ]
            heapq.heapify(heaps[key])
        return heaps[key]

    out: dict[int, tuple[Allocation, ...]] = {}
    for t in sorted(queued, key=lambda t: (priority_of(t.experiment_id), t.order, t.trial_id)):
        heap = heap_for(t.resource_pool, t.environment)
        while heap:
            n, agent_id = heap[0]
            if n != count.get(agent_id, 0):
                heapq.heapreplace(heap, (count.get(agent_id, 0), agent_id))
            elif n >= limit[agent_id]:
                heapq.heappop(heap)  # full: its count only grows this tick
            else:
                break
        if not heap:
            continue
        n, agent_id = heap[0]
        out[t.trial_id] = (Allocation(agent_id, ()),)
        count[agent_id] = n + 1
        heapq.heapreplace(heap, (n + 1, agent_id))
    return out
