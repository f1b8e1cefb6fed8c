"""Which running trials to stop so that a queued gang fits in a later tick.

The cheapest plan wins: first the slots of trials already stopping (free of cost), then the
fewest new victims, lowest priority and youngest first, so the least work is lost. A plan
is only made when it would really let the gang start; the free slots it counts on are held
for the rest of the tick so that no lower-priority trial slips into them. A plan frees slots of
one type (the `PoolSlots` it is given), counting a running trial's slots per agent and type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pedl_scheduler.scheduling.placement import PoolSlots
from pedl_scheduler.scheduling.state import DEFAULT_ENVIRONMENT, RunningTrial

MayStop = Callable[[RunningTrial], bool]
_Unit = tuple[str, str]  # (agent id, slot type): what one plan may free slots on
# (cost, victims, trials already stopping counted on, free slots to hold)
_AgentPlan = tuple[tuple[int, int], tuple[int, ...], tuple[int, ...], int]


@dataclass(frozen=True)
class Plan:
    victims: tuple[int, ...]  # new trials to stop
    reclaimed: tuple[int, ...]  # trials already stopping whose slots the gang counts on
    holds: tuple[tuple[str, tuple[str, ...]], ...]  # free slots to keep for the gang this tick
    cost: tuple[int, int]  # (victims, their slots)


class Preemptor:
    """The running trials of one tick, indexed by agent, with those already claimed by a plan."""

    def __init__(
        self,
        running: list[RunningTrial],
        priority: Mapping[int, int],
        slot_types: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """`slot_types`: agent -> slot -> type (`slot_types.types_of`); none given: all one type ""."""
        self.trials = {t.trial_id: t for t in running}
        self.slots = {t.trial_id: t.slots for t in running}
        self.priority = priority  # experiment id -> priority
        self.taken: set[int] = set()
        # (agent, slot type) -> trial -> its slots there, cheapest victim first
        self.on_agent: dict[_Unit, dict[int, int]] = {}
        slot_types = slot_types or {}
        one_type = {a: _one_type(types) for a, types in slot_types.items()}
        for t in sorted(running, key=lambda t: self.victim_key(t.trial_id)):
            for a in t.allocations:
                kind = one_type.get(a.agent_id, "")
                for slot in a.slot_ids:
                    unit = (a.agent_id, kind if kind is not None else slot_types[a.agent_id].get(slot, ""))
                    held = self.on_agent.setdefault(unit, {})
                    held[t.trial_id] = held.get(t.trial_id, 0) + 1
        # per-agent plans keyed by (agent and type, caller's key, slots); valid while the agent's free
        # slots and claimed trials are unchanged, both of which only shrink or grow in a tick
        self._touched: dict[str, int] = {}
        self._cache: dict[tuple[_Unit, object, int], tuple[int, int, _AgentPlan | None]] = {}

    def victim_key(self, trial_id: int) -> tuple[int, int, int]:
        t = self.trials[trial_id]
        return (-self.priority.get(t.experiment_id, 0), -t.order, -trial_id)

    def plan(
        self,
        pool: PoolSlots,
        slots: int,
        may_stop: MayStop,
        budget: Mapping[int, float],
        cache_as: object = None,
        environment: str = DEFAULT_ENVIRONMENT,
    ) -> Plan | None:
        """The cheapest plan to free `slots` on agents of `pool` offering `environment`, or None if
        stopping what may be stopped won't do.

        `budget` caps, per experiment listed, how many slots may be taken from it (fair share).
        Calls passing the same `cache_as` (not None) promise the same `may_stop`, environment and
        no budget, so per-agent work is reused between them.
        """
        if slots <= pool.largest_offering(environment):
            return self._single(pool, slots, may_stop, budget, cache_as, environment)
        return self._multi(pool, slots, may_stop, budget, environment)

    def _candidates(self, unit: _Unit, may_stop: MayStop) -> tuple[list[int], list[int], int]:
        """(trials already stopping, trials that may be stopped by cost order, slots held by neither)."""
        stopping, stoppable, other = [], [], 0
        for trial_id, n in self.on_agent.get(unit, {}).items():
            t = self.trials[trial_id]
            if trial_id in self.taken:
                other += n
            elif t.preempting:
                stopping.append(trial_id)
            elif t.preemptible and may_stop(t):
                stoppable.append(trial_id)
            else:
                other += n
        return stopping, stoppable, other

    def _single(
        self,
        pool: PoolSlots,
        slots: int,
        may_stop: MayStop,
        budget: Mapping[int, float],
        cache_as: object,
        environment: str,
    ) -> Plan | None:
        best: _AgentPlan | None = None
        best_agent = ""
        for agent_id in pool.agent_ids:
            free = len(pool.free[agent_id])
            if pool.size[agent_id] < slots or free >= slots or not pool.offers(agent_id, environment):
                continue
            unit = (agent_id, pool.slot_type)
            if cache_as is None:
                found = self._agent_plan(unit, free, slots, may_stop, budget)
            else:
                key, touched = (unit, cache_as, slots), self._touched.get(agent_id, 0)
                hit = self._cache.get(key)
                if hit is not None and hit[0] == free and hit[1] == touched:
                    found = hit[2]
                else:
                    found = self._agent_plan(unit, free, slots, may_stop, budget)
                    self._cache[key] = (free, touched, found)
            if found is not None and (best is None or found[0] < best[0]):
                best, best_agent = found, agent_id
                if found[0] == (0, 0):
                    break
        if best is None:
            return None
        cost, victims, reclaimed, need_free = best
        return Plan(victims, reclaimed, ((best_agent, tuple(pool.free[best_agent][:need_free])),), cost)

    def _agent_plan(
        self, unit: _Unit, free: int, slots: int, may_stop: MayStop, budget: Mapping[int, float]
    ) -> _AgentPlan | None:
        on_agent = self.on_agent.get(unit, {})
        stopping, stoppable, _ = self._candidates(unit, may_stop)
        got, reclaimed = free, []
        for trial_id in stopping:
            if got >= slots:
                break
            reclaimed.append(trial_id)
            got += on_agent[trial_id]
        left = dict(budget) if budget else None
        victims: list[int] = []
        for trial_id in stoppable:
            if got >= slots:
                break
            if left:
                e, n = self.trials[trial_id].experiment_id, self.slots[trial_id]
                if e in left:
                    if left[e] < n:
                        continue
                    left[e] -= n
            victims.append(trial_id)
            got += on_agent[trial_id]
        if got < slots:
            return None
        for trial_id in list(victims):  # drop small victims made redundant by a later large one
            if got - on_agent[trial_id] >= slots:
                victims.remove(trial_id)
                got -= on_agent[trial_id]
        cost = (len(victims), sum(on_agent[v] for v in victims))
        need_free = max(slots - sum(on_agent[t] for t in (*reclaimed, *victims)), 0)
        return cost, tuple(victims), tuple(reclaimed), need_free

    def _multi(
        self, pool: PoolSlots, slots: int, may_stop: MayStop, budget: Mapping[int, float], environment: str
    ) -> Plan | None:
        """Whole agents of one size, largest size first, each cleared at the least cost."""
        eligible = {a: n for a, n in pool.size.items() if n and pool.offers(a, environment)}
        for size in sorted(set(eligible.values()), reverse=True):
            if slots % size:
                continue
            options: list[tuple[tuple[int, int], str, list[int], list[int]]] = []
            for agent_id in sorted(a for a, n in eligible.items() if n == size):
                stopping, stoppable, other = self._candidates((agent_id, pool.slot_type), may_stop)
                on_agent = self.on_agent.get((agent_id, pool.slot_type), {})
                accounted = len(pool.free[agent_id]) + sum(on_agent[t] for t in (*stopping, *stoppable))
                if other or accounted < size:
                    continue  # slots held by something that may not be stopped
                cost = (len(stoppable), sum(on_agent[t] for t in stoppable))
                options.append((cost, agent_id, stopping, stoppable))
            options.sort(key=lambda o: (o[0], o[1]))
            chosen, left = [], dict(budget)
            for option in options:
                demand: dict[int, int] = {}
                for trial_id in option[3]:
                    t = self.trials[trial_id]
                    if t.experiment_id in left:
                        demand[t.experiment_id] = demand.get(t.experiment_id, 0) + t.slots
                if any(left[e] < n for e, n in demand.items()):
                    continue
                for e, n in demand.items():
                    left[e] -= n
                chosen.append(option)
                if len(chosen) == slots // size:
                    break
            if len(chosen) < slots // size:
                continue
            victims = tuple(sorted({v for o in chosen for v in o[3]}))
            reclaimed = tuple(sorted({v for o in chosen for v in o[2]}))
            holds = tuple((o[1], tuple(pool.free[o[1]])) for o in chosen)
            return Plan(victims, reclaimed, holds, (len(victims), sum(self.trials[v].slots for v in victims)))
        return None

    def commit(self, pool: PoolSlots, plan: Plan) -> None:
        for trial_id in (*plan.victims, *plan.reclaimed):
            self.claim(trial_id)
        for agent_id, slot_ids in plan.holds:
            pool.take(agent_id, slot_ids)

    def claim(self, trial_id: int) -> None:
        """No later plan of this tick may count on the trial's slots (a plan or a handoff took them)."""
        if trial_id in self.taken or trial_id not in self.trials:
            return
        self.taken.add(trial_id)
        for a in self.trials[trial_id].allocations:
            self._touched[a.agent_id] = self._touched.get(a.agent_id, 0) + 1


def _one_type(types: Mapping[str, str]) -> str | None:
    """The type of all of an agent's slots, or None when it offers several: then each slot's type
    counts. An agent of one type is credited with every slot its trials hold there."""
    kinds = set(types.values())
    return None if len(kinds) > 1 else next(iter(kinds), "")
