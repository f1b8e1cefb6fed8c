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
    """Highest priority and oldest first, each on the agent of its pool running the fewest such trials."""
    count: dict[str, int] = {}
    for t in running:
        if t.allocations and not t.slots:
            for a in t.allocations:
                count[a.agent_id] = count.get(a.agent_id, 0) + 1
    heaps: dict[str, list[tuple[int, str, int]]] = {}
    for a in agents:
        limit = cap if cap is not None else max(len(a.slot_ids), 1)
        heaps.setdefault(a.resource_pool, []).append((count.get(a.agent_id, 0), a.agent_id, limit))
    for heap in heaps.values():
        heapq.heapify(heap)
    out: dict[int, tuple[Allocation, ...]] = {}
    for t in sorted(queued, key=lambda t: (priority_of(t.experiment_id), t.order, t.trial_id)):
        heap = heaps.get(t.resource_pool)
        while heap and heap[0][0] >= heap[0][2]:
            heapq.heappop(heap)  # full: its count only grows this tick
        if not heap:
            continue
        n, agent_id, limit = heapq.heappop(heap)
        out[t.trial_id] = (Allocation(agent_id, ()),)
        heapq.heappush(heap, (n + 1, agent_id, limit))
    return out
