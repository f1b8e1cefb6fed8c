"""Where a gang of slots fits in one resource pool, with the free slots indexed for fast best-fit.

A trial that fits on one agent (by agent size) waits for one agent: splitting it over
half-busy hosts would slow its training for good. A larger trial takes whole idle agents
of one size, `slots / size` of them, largest size first (Determined's multi-agent fit), so
every process of the gang gets the same number of slots. Only agents offering the trial's
Python environment count, for fitting now as for fitting ever. One `PoolSlots` holds slots of
one type (`slot_types.py` splits a pool by type), so no gang it places mixes GPUs and CPU slots.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from pedl_scheduler.scheduling.state import DEFAULT_ENVIRONMENT, Agent, Allocation


class PoolSlots:
    """The free slots of one pool's agents during one tick; slots only ever get taken."""

    def __init__(self, agents: list[Agent], slot_type: str = "") -> None:
        self.slot_type = slot_type
        self.size = {a.agent_id: len(a.slot_ids) for a in agents}
        self.free = {a.agent_id: list(a.free_slot_ids) for a in agents}
        self.environments = {a.agent_id: a.environments for a in agents}
        self._largest: dict[str, int] = {}
        self.agent_ids = sorted(self.size)
        self.largest = max(self.size.values(), default=0)
        self.total = sum(self.size.values())
        # free count -> agent ids, sorted; idle agents by size -> agent ids, sorted
        self._by_free: dict[int, list[str]] = {}
        self._idle: dict[int, list[str]] = {}
        for agent_id in self.agent_ids:
            self._add(agent_id)

    def _add(self, agent_id: str) -> None:
        free, size = len(self.free[agent_id]), self.size[agent_id]
        insort(self._by_free.setdefault(free, []), agent_id)
        if free == size and size:
            insort(self._idle.setdefault(size, []), agent_id)

    def _remove(self, agent_id: str) -> None:
        free, size = len(self.free[agent_id]), self.size[agent_id]
        bucket = self._by_free[free]
        del bucket[bisect_left(bucket, agent_id)]
        if free == size and size:
            idle = self._idle[size]
            del idle[bisect_left(idle, agent_id)]

    def offers(self, agent_id: str, environment: str) -> bool:
        return environment in self.environments[agent_id]

    def largest_offering(self, environment: str) -> int:
        """The most slots one agent offering `environment` has: larger gangs span agents."""
        if environment not in self._largest:
            self._largest[environment] = max(
                (n for a, n in self.size.items() if environment in self.environments[a]), default=0
            )
        return self._largest[environment]

    def fit(self, slots: int, environment: str = DEFAULT_ENVIRONMENT) -> tuple[Allocation, ...] | None:
        """The allocation for a gang of `slots`, or None if it cannot start now."""
        largest = self.largest_offering(environment)
        if slots <= largest:
            for free in range(slots, largest + 1):
                for agent_id in self._by_free.get(free, ()):
                    if environment in self.environments[agent_id]:
                        return (Allocation(agent_id, tuple(self.free[agent_id][:slots])),)
            return None
        for size in sorted(self._idle, reverse=True):
            if slots % size:
                continue
            idle = [a for a in self._idle[size] if environment in self.environments[a]]
            if len(idle) >= slots // size:
                return tuple(Allocation(a, tuple(self.free[a])) for a in idle[: slots // size])
        return None

    def could_ever_fit(self, slots: int, environment: str = DEFAULT_ENVIRONMENT) -> bool:
        """Whether the pool's shape admits the gang at all, every slot free."""
        if slots <= self.largest_offering(environment):
            return True
        sizes: dict[int, int] = {}
        for agent_id, size in self.size.items():
            if environment in self.environments[agent_id]:
                sizes[size] = sizes.get(size, 0) + 1
        return any(size and slots % size == 0 and count >= slots // size for size, count in sizes.items())

    def take(self, agent_id: str, slot_ids: tuple[str, ...] | list[str]) -> None:
        if not slot_ids:
            return
        self._remove(agent_id)
        gone = set(slot_ids)
        self.free[agent_id] = [s for s in self.free[agent_id] if s not in gone]
        self._add(agent_id)
